//! `loupe db stats`: rows and bytes of every table and segment of a datadir, as a table or JSON.

use eyre::Result;

use super::admin;
use super::args::DatadirArgs;

/// `loupe db stats`.
#[derive(Debug, clap::Args)]
pub struct StatsCmd {
    /// Data directory to look at.
    #[command(flatten)]
    pub datadir: DatadirArgs,
    /// Print JSON (one object with a `tables` array) instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl StatsCmd {
    pub(super) fn run(self) -> Result<()> {
        let stats = admin::stats(&self.datadir.datadir, self.datadir.cache_bytes())?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&stats_json(&stats))?);
        } else {
            print!("{}", stats_text(&stats));
        }
        Ok(())
    }
}

pub(super) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `loupe db stats` as a table: one line per table, then the totals and the file.
fn stats_text(stats: &crate::storage::DatabaseStats) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let head = stats.head.map_or_else(|| "none".to_string(), |h| format!("#{h}"));
    let _ = writeln!(out, "head {head}");
    let _ = writeln!(
        out,
        "{:<26} {:>13} {:>6} {:>12} {:>12} {:>12} {:>8}",
        "table", "rows", "height", "stored MiB", "free MiB", "pages MiB", "of file"
    );
    let file = stats.file_bytes.max(1) as f64;
    let line = |out: &mut String, name: &str, rows: u64, height: String, stored, free, occ| {
        let _ = writeln!(
            out,
            "{name:<26} {rows:>13} {height:>6} {:>12.1} {:>12.1} {:>12.1} {:>7.1}%",
            mib(stored),
            mib(free),
            mib(occ),
            100.0 * occ as f64 / file
        );
    };
    for t in &stats.tables {
        let occupied = t.occupied_bytes();
        line(
            &mut out,
            t.name,
            t.entries,
            t.height.to_string(),
            t.stored_bytes,
            t.fragmented_bytes,
            occupied,
        );
    }
    let sum = |f: fn(&crate::storage::TableStats) -> u64| stats.tables.iter().map(f).sum::<u64>();
    let occupied = sum(crate::storage::TableStats::occupied_bytes);
    line(
        &mut out,
        "(all tables)",
        sum(|t| t.entries),
        String::new(),
        sum(|t| t.stored_bytes),
        sum(|t| t.fragmented_bytes),
        occupied,
    );
    let _ = writeln!(
        out,
        "file {:.1} MiB ({:.1} MiB on disk); {:.1} MiB in no table (free pages and redb's own)",
        mib(stats.file_bytes),
        mib(stats.disk_bytes),
        mib(stats.file_bytes.saturating_sub(occupied))
    );
    let _ = writeln!(out, "segments (epochs below {} frozen):", stats.frozen_to);
    let _ = writeln!(out, "{:<26} {:>13} {:>6} {:>12}", "kind", "rows", "files", "MiB");
    for s in &stats.segments {
        let _ =
            writeln!(out, "{:<26} {:>13} {:>6} {:>12.1}", s.kind, s.rows, s.files, mib(s.bytes));
    }
    let seg_bytes: u64 = stats.segments.iter().map(|s| s.bytes).sum();
    let _ = writeln!(
        out,
        "datadir {:.1} MiB on disk: the file and {:.1} MiB of segments",
        mib(stats.disk_bytes + seg_bytes),
        mib(seg_bytes)
    );
    if let Some(stage) = &stats.trie_stage {
        let _ = writeln!(out, "{}", trie_stage_text(stage));
    }
    out
}

/// Where the trie-history stage stands, in a line.
fn trie_stage_text(stage: &crate::storage::history::staged::TrieStage) -> String {
    match stage.failed {
        Some((block, header, computed)) => format!(
            "trie history: the stage stopped at block {block}: its header state root {header} is not the root of its state {computed}"
        ),
        None if stage.pending() => format!(
            "trie history: per block up to #{}; blocks #{}..=#{} wait for the trie-history stage (it runs in `loupe import` and beside `loupe node`)",
            stage.staged_to,
            stage.staged_to + 1,
            stage.grouped_to
        ),
        None => format!(
            "trie history: per block at every block (last grouped import to #{})",
            stage.grouped_to
        ),
    }
}

/// `loupe db stats --json`.
fn stats_json(stats: &crate::storage::DatabaseStats) -> serde_json::Value {
    let tables: Vec<_> = stats
        .tables
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "rows": t.entries,
                "height": t.height,
                "leafPages": t.leaf_pages,
                "branchPages": t.branch_pages,
                "storedBytes": t.stored_bytes,
                "metadataBytes": t.metadata_bytes,
                "fragmentedBytes": t.fragmented_bytes,
                "occupiedBytes": t.occupied_bytes(),
            })
        })
        .collect();
    let segments: Vec<_> = stats
        .segments
        .iter()
        .map(|s| serde_json::json!({"kind": s.kind, "files": s.files, "rows": s.rows, "bytes": s.bytes}))
        .collect();
    serde_json::json!({
        "head": stats.head,
        "fileBytes": stats.file_bytes,
        "diskBytes": stats.disk_bytes,
        "tables": tables,
        "frozenTo": stats.frozen_to,
        "segments": segments,
        "trieStage": stats.trie_stage.map(|s| serde_json::json!({
            "stagedTo": s.staged_to,
            "groupedTo": s.grouped_to,
            "pending": s.pending(),
            "failedAt": s.failed.map(|f| f.0),
        })),
    })
}
