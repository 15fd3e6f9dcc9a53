//! `loupe db snapshot` through the real binary: a copy of the dev chain answers every block,
//! receipt, trace and historical balance, storage slot and code exactly as the original does
//! and passes `loupe verify`; taken while `loupe node` serves the datadir (through its admin
//! socket), after that node was killed (a stale socket), and refused with a clear message where
//! it cannot be taken. `loupe db compact` (refused while a node serves) rewrites an imported datadir packed: every table
//! keeps its rows, the file shrinks, `verify` passes, and it is refused where it must be.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
#[path = "common/tables.rs"]
mod tables;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn loupe(args: &[&str], dirs: &[&Path]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(args);
    for d in dirs {
        c.arg(d);
    }
    c.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn snapshot(from: &Path, to: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(["db", "snapshot", "--datadir"]).arg(from).arg("--out").arg(to);
    c.output().unwrap()
}

/// Every answer a client could ask of the dev chain, per block.
fn answers(node: &support::Node, head: u64) -> Vec<Value> {
    let accounts: Vec<String> = loupe::dev::dev_accounts()
        .iter()
        .map(|a| format!("{a:#x}"))
        .chain([format!("{:#x}", loupe::dev::COUNTER)])
        .collect();
    let mut all = vec![];
    for n in 0..=head {
        let b = json!(format!("{n:#x}"));
        all.push(node.call("eth_getBlockByNumber", json!([b, true])).unwrap());
        all.push(node.call("eth_getBlockReceipts", json!([b])).unwrap());
        all.push(node.call("trace_block", json!([b])).unwrap());
        for a in &accounts {
            all.push(node.call("eth_getBalance", json!([a, b])).unwrap());
            all.push(node.call("eth_getTransactionCount", json!([a, b])).unwrap());
            all.push(node.call("eth_getStorageAt", json!([a, "0x0", b])).unwrap());
            all.push(node.call("eth_getCode", json!([a, b])).unwrap());
        }
    }
    all
}

fn assert_same_chain(a: &Path, b: &Path) {
    let verify = loupe(&["verify", "--datadir"], &[b]);
    assert!(verify.status.success(), "{}", text(&verify));
    let open = |d: &Path| {
        let db = loupe::storage::Database::open(d).unwrap();
        let spec = loupe::import::load_spec(&db).unwrap().unwrap();
        let head = db.begin_read().unwrap().head().unwrap().unwrap();
        (Arc::new(db), spec, head)
    };
    let (da, sa, ha) = open(a);
    let (db, sb, hb) = open(b);
    assert_eq!(ha, hb);
    let (na, nb) = (support::Node::serve(da, sa, |_| {}), support::Node::serve(db, sb, |_| {}));
    let (x, y) = (answers(&na, ha), answers(&nb, hb));
    assert_eq!(x.len(), y.len());
    for (i, (x, y)) in x.iter().zip(&y).enumerate() {
        assert_eq!(x, y, "answer {i}");
    }
}

#[test]
fn a_snapshot_of_a_stopped_datadir_answers_everything_the_original_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    drop(support::dev_chain(&a));
    let out = snapshot(&a, &b);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("at head #20"), "{}", text(&out));
    assert_same_chain(&a, &b);

    // Refused, with what was wrong: a target that holds a database, a source that holds none.
    let again = snapshot(&a, &b);
    assert!(!again.status.success());
    assert!(text(&again).contains("a database is already there"), "{}", text(&again));
    let none = snapshot(&tmp.path().join("nothing"), &tmp.path().join("c"));
    assert!(!none.status.success());
    assert!(text(&none).contains("holds no loupe database"), "{}", text(&none));
    assert!(!tmp.path().join("c").exists());
}

#[test]
fn a_snapshot_is_taken_by_the_serving_node_and_without_it_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
    drop(support::dev_chain(&a));
    let mut node = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["node", "--http.port", "0", "--datadir"])
        .arg(&a)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = a.join("loupe.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "no admin socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The node holds the database: nothing else can open it, yet the snapshot is taken.
    let locked = loupe(&["verify", "--datadir"], &[&a]);
    assert!(!locked.status.success(), "{}", text(&locked));
    let out = snapshot(&a, &b);
    assert!(out.status.success(), "{}", text(&out));
    // Compaction needs the datadir to itself: refused, naming the serving process.
    let busy = loupe(&["db", "compact", "--datadir"], &[&a]);
    assert!(!busy.status.success());
    assert!(text(&busy).contains("its admin socket answers"), "{}", text(&busy));
    node.kill().unwrap();
    node.wait().unwrap();
    // The killed node left its socket file; nothing answers there, so the copy is direct.
    assert!(socket.exists());
    let out = snapshot(&a, &c);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_chain(&a, &b);
    assert_same_chain(&a, &c);
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().unwrap()
}

/// A generated chain (3,000 accounts, 80 blocks) in `tmp/gen`.
fn generated_chain(tmp: &Path) -> std::path::PathBuf {
    let gen_dir = tmp.join("gen");
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let out = run(&[
        os("generate"),
        os("--accounts"),
        os("3000"),
        os("--blocks"),
        os("80"),
        os("--gas-limit"),
        os("5000000"),
        os("--out"),
        gen_dir.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    gen_dir
}

/// Imports the chain in `gen_dir` into a new datadir `data`, in groups of `batch` blocks, with
/// `extra` flags; returns what the import printed.
fn import(gen_dir: &Path, data: &Path, batch: &str, extra: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(["import", "--import.batch", batch, "--datadir"]).arg(data);
    c.arg("--genesis").arg(gen_dir.join("genesis.json")).args(extra);
    let out = c.arg(gen_dir.join("chain.rlp")).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

/// A datadir grown by an import of a generated chain, its freed pages kept: history rows all
/// over every table, and free pages in the file. `extra` flags go to the import.
fn imported_datadir(tmp: &Path, extra: &[&str]) -> std::path::PathBuf {
    let data = tmp.join("data");
    let mut flags = vec!["--import.compact", "off"];
    flags.extend_from_slice(extra);
    import(&generated_chain(tmp), &data, "512", &flags);
    data
}

/// Copies a stopped datadir's database file and its segment files (a grouped import freezes
/// the epochs below its last group's root into them) to a new datadir `to`.
fn copy_datadir(from: &Path, to: &Path) {
    let segments = loupe::storage::segments::SEGMENTS_DIR;
    std::fs::create_dir_all(to.join(segments)).unwrap();
    std::fs::copy(from.join(loupe::storage::DB_FILE), to.join(loupe::storage::DB_FILE)).unwrap();
    if let Ok(files) = std::fs::read_dir(from.join(segments)) {
        for f in files {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(segments).join(f.file_name())).unwrap();
        }
    }
}

/// `loupe db compact --in-place` gives back the pages an import's commits freed, without a
/// copy: the file shrinks, every table holds the rows it held, and `verify --history` accepts
/// it. Imported in groups of 8 blocks, so that many commits free pages.
#[test]
fn compacting_in_place_gives_back_the_free_pages_and_keeps_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let gen_dir = generated_chain(tmp.path());
    let (data, before) = (tmp.path().join("data"), tmp.path().join("before"));
    import(&gen_dir, &data, "8", &["--import.compact", "off"]);
    let file = loupe::storage::DB_FILE;
    copy_datadir(&data, &before);
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let out = run(&[os("db"), os("compact"), os("--in-place"), os("--datadir"), data.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("gave back the free pages"), "{}", text(&out));
    assert!(!data.join(loupe::storage::COMPACT_DIR).exists(), "no copy is made");
    let size = |d: &Path| std::fs::metadata(d.join(file)).unwrap().len();
    let (old, new) = (size(&before), size(&data));
    assert!(new < old * 9 / 10, "{new} bytes against {old}");
    tables::assert_same_tables(&data, &before, "compacted in place against the original");
    let verify = run(&[os("verify"), os("--history"), os("--datadir"), data.as_os_str()]);
    assert!(verify.status.success(), "{}", text(&verify));
    // Refused while another process holds the datadir.
    let held = loupe::storage::Database::open(&data).unwrap();
    let busy = run(&[os("db"), os("compact"), os("--in-place"), os("--datadir"), data.as_os_str()]);
    assert!(text(&busy).contains("compacting needs the datadir to itself"), "{}", text(&busy));
    drop(held);
}

/// An import that ran to the end compacts its file: by default (disk space to spare) packed,
/// as small as the same import's with `--import.compact off` after `loupe db compact`; with
/// `--import.compact in-place`, as small as that import's after `loupe db compact --in-place`
/// (the second path to each file). Every table holds the same rows. An import that stored
/// nothing leaves the file alone.
#[test]
fn an_import_compacts_the_file_its_commits_left() {
    let tmp = tempfile::tempdir().unwrap();
    let gen_dir = generated_chain(tmp.path());
    let dir = |name: &str| tmp.path().join(name);
    let said = import(&gen_dir, &dir("auto"), "8", &[]);
    assert!(said.contains("packed the file (every leaf full)"), "{said}");
    let said = import(&gen_dir, &dir("in-place"), "8", &["--import.compact", "in-place"]);
    assert!(said.contains("gave back the free pages the import's commits left"), "{said}");
    for kept in ["kept", "kept-2"] {
        let said = import(&gen_dir, &dir(kept), "8", &["--import.compact", "off"]);
        assert!(!said.contains("packed") && !said.contains("gave back"), "{said}");
    }
    // The disk space each file takes: a packed file's unwritten tail is a hole.
    let size = |d: &Path| loupe::storage::disk_bytes(&d.join(loupe::storage::DB_FILE)).unwrap();
    let kept_size = size(&dir("kept"));
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let compact = |args: &[&std::ffi::OsStr], d: &Path| {
        let mut all = vec![os("db"), os("compact")];
        all.extend_from_slice(args);
        all.extend_from_slice(&[os("--datadir"), d.as_os_str()]);
        let out = run(&all);
        assert!(out.status.success(), "{}", text(&out));
    };
    compact(&[], &dir("kept"));
    compact(&[os("--in-place")], &dir("kept-2"));
    for (mine, later) in [("auto", "kept"), ("in-place", "kept-2")] {
        let (now, then) = (size(&dir(mine)), size(&dir(later)));
        assert!(now < kept_size * 9 / 10, "{mine}: {now} bytes against {kept_size} kept");
        assert!(now <= then + then / 20, "{mine}: {now} bytes against {then} compacted later");
        tables::assert_same_tables(&dir(mine), &dir(later), mine);
    }
    assert!(size(&dir("auto")) < size(&dir("in-place")), "packing leaves the smaller file");
    // The packed file's tail past its last page is left unwritten rather than given back by
    // redb's compaction: that compaction, run on a copy of it now, finds nothing to give back.
    let trimmed = dir("auto-trimmed");
    copy_datadir(&dir("auto"), &trimmed);
    compact(&[os("--in-place")], &trimmed);
    let packed = size(&dir("auto"));
    assert!(
        size(&trimmed) + size(&trimmed) / 50 >= packed,
        "{packed} > {} trimmed",
        size(&trimmed)
    );
    let verify = run(&[os("verify"), os("--history"), os("--datadir"), dir("auto").as_os_str()]);
    assert!(verify.status.success(), "{}", text(&verify));
    let before = size(&dir("auto"));
    let again = import(&gen_dir, &dir("auto"), "8", &[]);
    assert!(again.contains("nothing to import") && !again.contains("packed"), "{again}");
    assert_eq!(
        size(&dir("auto")),
        before,
        "an import that stored nothing leaves the file as it was"
    );
    // A short import onto a datadir (the last 4 blocks after 76) does not at least double the
    // file, so `auto` leaves it alone; the blocks are stored all the same. The 76 blocks are
    // imported unpacked: below one region (4 GiB) redb doubles a file that has no free page
    // left at its first growth, so any write to a file just packed doubles it, whatever it
    // writes (the import's commit, then the trie-history stage's).
    let part = tmp.path().join("part.rlp");
    let kept = dir("kept");
    let out = run(&[
        os("export"),
        os("--datadir"),
        kept.as_os_str(),
        os("--to"),
        os("76"),
        part.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(["import", "--import.batch", "8", "--import.compact", "off", "--datadir"]);
    let out = c.arg(dir("short")).arg("--genesis").arg(gen_dir.join("genesis.json")).arg(&part);
    let out = out.output().unwrap();
    assert!(out.status.success() && !text(&out).contains("packed"), "{}", text(&out));
    let said = import(&gen_dir, &dir("short"), "8", &[]);
    assert!(said.contains("imported 4 blocks") && !said.contains("packed"), "{said}");
}

/// SIGKILL at moments spread over `loupe db compact --in-place` (redb compacting the file
/// where it is, calibrated by an uninterrupted run): after each kill the database opens, holds
/// every row it held, and `verify` accepts it; a run to the end afterwards shrinks it.
#[test]
fn a_kill_while_compacting_in_place_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let gen_dir = generated_chain(tmp.path());
    let original = tmp.path().join("original");
    import(&gen_dir, &original, "8", &["--import.compact", "off"]);
    let file = loupe::storage::DB_FILE;
    let fresh = |dir: &Path| {
        let _ = std::fs::remove_dir_all(dir);
        copy_datadir(&original, dir);
    };
    let in_place = |dir: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
        c.args(["db", "compact", "--in-place", "--datadir"]).arg(dir);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    let probe = tmp.path().join("probe");
    fresh(&probe);
    let started = Instant::now();
    assert!(in_place(&probe).status().unwrap().success());
    let whole = started.elapsed().as_micros() as u64;
    let shrunk = std::fs::metadata(probe.join(file)).unwrap().len();

    let data = tmp.path().join("data");
    let kills = 16;
    let mut part_done = 0;
    for i in 0..kills {
        fresh(&data);
        let at = Duration::from_micros(whole * (2 * i + 1) / (2 * kills));
        let mut child = in_place(&data).spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        child.wait().unwrap();
        let len = std::fs::metadata(data.join(file)).unwrap().len();
        let was = std::fs::metadata(original.join(file)).unwrap().len();
        part_done += usize::from(len < was);
        let what = format!("after a kill at {at:?} of {whole} µs");
        tables::assert_same_tables(&data, &original, &what);
        let verify = loupe(&["verify", "--datadir"], &[&data]);
        assert!(verify.status.success(), "{what}: {}", text(&verify));
        assert!(in_place(&data).status().unwrap().success(), "{what}: a run to the end");
        let len = std::fs::metadata(data.join(file)).unwrap().len();
        assert!(len <= shrunk + shrunk / 20, "{what}: {len} bytes against {shrunk}");
    }
    eprintln!("{part_done} of {kills} kills left a file already cut ({whole} µs a run)");
}

/// SIGKILL at moments spread over a compaction of an imported datadir (calibrated by an
/// uninterrupted one) never loses the database: after each kill the datadir holds every row it held, and `verify`
/// passes; a compaction run to the end afterwards packs it.
#[test]
fn a_compaction_killed_at_any_moment_leaves_the_database_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let data = imported_datadir(tmp.path(), &[]);
    let original = tmp.path().join("original");
    copy_datadir(&data, &original);
    let compact = |dir: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
        c.args(["db", "compact", "--datadir"]).arg(dir).stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    // Calibration on a copy: how long a whole compaction takes here.
    let probe = tmp.path().join("probe");
    copy_datadir(&data, &probe);
    let started = Instant::now();
    assert!(compact(&probe).status().unwrap().success());
    let whole = started.elapsed().as_micros() as u64;

    let kills = 12;
    let mut mid_copy = 0;
    for i in 0..kills {
        let at = Duration::from_micros(whole * (2 * i + 1) / (2 * kills));
        let mut child = compact(&data).spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        child.wait().unwrap();
        mid_copy += usize::from(data.join(loupe::storage::COMPACT_DIR).exists());
        let what = format!("after a kill at {at:?} of {whole} µs");
        tables::assert_same_tables(&data, &original, &what);
        let verify = loupe(&["verify", "--datadir"], &[&data]);
        assert!(verify.status.success(), "{what}: {}", text(&verify));
    }
    // Kills landed while the copy was being written, not only before or after it.
    assert!(mid_copy > 0, "no kill of {kills} landed during a copy ({whole} µs in all)");
    assert!(compact(&data).status().unwrap().success());
    assert!(!data.join(loupe::storage::COMPACT_DIR).exists());
    tables::assert_same_tables(&data, &original, "after a whole compaction");
}

/// Refused, with what was wrong: a datadir with no database, and one another process holds
/// (here the test itself, as a serving node would).
#[test]
fn compacting_is_refused_without_a_database_or_while_the_datadir_is_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let none = run(&[
        std::ffi::OsStr::new("db"),
        std::ffi::OsStr::new("compact"),
        std::ffi::OsStr::new("--datadir"),
        tmp.path().join("nothing").as_os_str(),
    ]);
    assert!(!none.status.success());
    assert!(text(&none).contains("holds no loupe database"), "{}", text(&none));

    let data = tmp.path().join("dev");
    let held = support::dev_chain(&data);
    let busy = run(&[
        std::ffi::OsStr::new("db"),
        std::ffi::OsStr::new("compact"),
        std::ffi::OsStr::new("--datadir"),
        data.as_os_str(),
    ]);
    assert!(!busy.status.success());
    assert!(text(&busy).contains("compacting needs the datadir to itself"), "{}", text(&busy));
    drop(held);
    assert!(!data.join(loupe::storage::COMPACT_DIR).exists());
}

/// `loupe db stats` on an imported datadir lists every table with the rows it holds (counted
/// again here by reading each table through), all within the file; a compaction leaves the
/// rows as they were and the tables' free space smaller. Refused, with what was wrong, while
/// another process holds the datadir.
#[test]
fn stats_list_every_table_with_its_rows_and_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    // Every block's root checked: nothing of the 80 blocks is frozen (they are all inside the
    // unwind window), so each table holds every row the dump counts.
    let data = imported_datadir(tmp.path(), &["--state-root", "block"]);
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let stats = |dir: &Path| -> Value {
        let out = run(&[os("db"), os("stats"), os("--json"), os("--datadir"), dir.as_os_str()]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let before = stats(&data);
    assert_eq!(before["head"], json!(80));
    let (rows, codes) = tables::dump_tables(&data);
    let listed = before["tables"].as_array().unwrap();
    assert_eq!(listed.len(), rows.len() + 2, "{listed:?}");
    let mut occupied = 0;
    let mut content_addressed = 0;
    for t in listed {
        let name = t["name"].as_str().unwrap();
        let n = t["rows"].as_u64().unwrap();
        match rows.get(name) {
            Some(r) => assert_eq!(n, r.len() as u64, "rows of {name}"),
            None => content_addressed += n,
        }
        let parts = ["storedBytes", "metadataBytes", "fragmentedBytes"];
        let sum: u64 = parts.iter().map(|p| t[p].as_u64().unwrap()).sum();
        assert_eq!(t["occupiedBytes"].as_u64(), Some(sum), "{t}");
        occupied += sum;
    }
    assert_eq!(content_addressed, codes.len() as u64, "bytecodes and preimages");
    assert!(rows["headers"].len() == 81 && rows["account_trie_history_e"].len() > 100);
    assert!(occupied <= before["fileBytes"].as_u64().unwrap(), "{before}");

    // The table as printed: a line per table.
    let out = run(&[os("db"), os("stats"), os("--datadir"), data.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    for name in rows.keys() {
        assert!(text(&out).lines().any(|l| l.starts_with(&format!("{name} "))), "{}", text(&out));
    }

    // Compacted: the same rows, and less free space inside the tables' pages.
    let compact = run(&[os("db"), os("compact"), os("--datadir"), data.as_os_str()]);
    assert!(compact.status.success(), "{}", text(&compact));
    let after = stats(&data);
    let free = |s: &Value| -> u64 {
        s["tables"].as_array().unwrap().iter().map(|t| t["fragmentedBytes"].as_u64().unwrap()).sum()
    };
    let rows_of = |s: &Value| -> Vec<(String, u64)> {
        let tables = s["tables"].as_array().unwrap();
        tables.iter().map(|t| (t["name"].to_string(), t["rows"].as_u64().unwrap())).collect()
    };
    assert_eq!(rows_of(&after), rows_of(&before));
    assert!(free(&after) < free(&before), "free {} after, {} before", free(&after), free(&before));

    let missing = tmp.path().join("nothing");
    let none = run(&[os("db"), os("stats"), os("--datadir"), missing.as_os_str()]);
    assert!(!none.status.success() && text(&none).contains("holds no loupe database"));
    let db = loupe::storage::Database::open(&data).unwrap();
    let busy = run(&[os("db"), os("stats"), os("--datadir"), data.as_os_str()]);
    assert!(!busy.status.success());
    assert!(text(&busy).contains("stats need the datadir to itself"), "{}", text(&busy));
    drop(db);
}
