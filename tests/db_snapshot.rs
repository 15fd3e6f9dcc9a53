//! `loupe db snapshot` through the real binary: a copy of the dev chain answers every block,
//! receipt, trace and historical balance, storage slot and code exactly as the original does
//! and passes `loupe verify`; taken while `loupe node` serves the datadir (through its admin
//! socket), after that node was killed (a stale socket), and refused with a clear message where
//! it cannot be taken. `loupe db compact` (refused while a node serves) rewrites an imported datadir packed: every table
//! keeps its rows, the file shrinks, `verify` passes, and it is refused where it must be.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
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
/// over every table, and free pages in the file.
fn imported_datadir(tmp: &Path) -> std::path::PathBuf {
    let data = tmp.join("data");
    import(&generated_chain(tmp), &data, "512", &["--import.shrink-after", "0"]);
    data
}

/// An import gives the pages its commits freed back to the file system at its end: the file
/// is smaller than after the same import that keeps them (`--import.shrink-after 0`), and
/// every table holds the same rows, which `verify --history` accepts. Imported in groups of 8
/// blocks, so that many commits free pages. An import shorter than `--import.shrink-after`
/// blocks (the default: 512) keeps them.
#[test]
fn an_import_gives_back_the_pages_its_commits_freed() {
    let tmp = tempfile::tempdir().unwrap();
    let gen_dir = generated_chain(tmp.path());
    let (kept, short, shrunk) =
        (tmp.path().join("kept"), tmp.path().join("short"), tmp.path().join("shrunk"));
    let out = import(&gen_dir, &kept, "8", &["--import.shrink-after", "0"]);
    assert!(!out.contains("gave back"), "{out}");
    let out = import(&gen_dir, &short, "8", &[]);
    assert!(!out.contains("gave back"), "80 blocks, fewer than the default 512: {out}");
    let out = import(&gen_dir, &shrunk, "8", &["--import.shrink-after", "80"]);
    assert!(out.contains("gave back") && out.contains("MiB of free pages"), "{out}");
    let size = |d: &Path| std::fs::metadata(d.join(loupe::storage::DB_FILE)).unwrap().len();
    let (kept_size, shrunk_size) = (size(&kept), size(&shrunk));
    assert!(shrunk_size < kept_size * 9 / 10, "{shrunk_size} bytes against {kept_size}");
    tables::assert_same_tables(&shrunk, &kept, "shrunk against kept");
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let verify = run(&[os("verify"), os("--history"), os("--datadir"), shrunk.as_os_str()]);
    assert!(verify.status.success(), "{}", text(&verify));
    // Nothing imported (every block already stored): nothing to give back.
    let again = import(&gen_dir, &shrunk, "8", &["--import.shrink-after", "1"]);
    assert!(!again.contains("gave back"), "{again}");
}

/// A datadir grown by an import of a generated chain (history rows all over every table) is
/// compacted in place: the file shrinks, every table holds row for row what it held,
/// `loupe verify --history` passes, a work directory left by a killed compaction is cleared
/// first, and the node opens and serves the new file.
#[test]
fn compacting_an_imported_datadir_keeps_every_row_and_shrinks_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let data = imported_datadir(tmp.path());
    let before = tmp.path().join("before");
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    std::fs::create_dir_all(&before).unwrap();
    let file = loupe::storage::DB_FILE;
    std::fs::copy(data.join(file), before.join(file)).unwrap();
    // The file's mode (and owner) carry over to the packed file.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::Permissions::from_mode(0o640);
    std::fs::set_permissions(data.join(file), mode).unwrap();
    // What a compaction killed while copying leaves behind.
    let stale = data.join(loupe::storage::COMPACT_DIR);
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join(file), b"half a copy").unwrap();

    let out = run(&[os("db"), os("compact"), os("--datadir"), data.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("at head #80"), "{}", text(&out));
    assert!(!stale.exists(), "the work directory is left behind");
    let packed = std::fs::metadata(data.join(file)).unwrap();
    assert_eq!(packed.permissions().mode() & 0o777, 0o640);
    // Disk blocks and length alike (a redb file can be sparse).
    let size = |d: &Path| {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(d.join(file)).unwrap();
        (m.blocks() * 512, m.len())
    };
    let (old, new) = (size(&before), size(&data));
    // Smaller, but by how much is a benchmark: the import packs each closed epoch's history
    // itself, so with short epochs (CI's second pass) most of the history was packed already.
    assert!(new.0 < old.0 && new.1 < old.1, "compacted to {new:?} bytes from {old:?}");
    tables::assert_same_tables(&data, &before, "compacted against the original");
    let verify = run(&[os("verify"), os("--history"), os("--datadir"), data.as_os_str()]);
    assert!(verify.status.success(), "{}", text(&verify));

    // The node serves the compacted file: the head block is there, with its state root.
    let db = Arc::new(loupe::storage::Database::open(&data).unwrap());
    let spec = loupe::import::load_spec(&db).unwrap().unwrap();
    let node = support::Node::serve(db, spec, |_| {});
    let head = node.call("eth_getBlockByNumber", json!(["latest", false])).unwrap();
    assert_eq!(head["number"], json!("0x50"));
}

/// SIGKILL at moments spread over an import's end, where it gives back its free pages (redb
/// compacting the file in place): after each kill the database opens at a whole block that
/// `verify` accepts, and a re-run completes with every table as an import that kept its free
/// pages has it. Each run imports the last 8 of 80 blocks into a copy of a 72-block datadir.
#[test]
fn a_kill_while_an_import_gives_back_its_pages_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let gen_dir = generated_chain(tmp.path());
    let reference = tmp.path().join("reference");
    import(&gen_dir, &reference, "8", &["--import.shrink-after", "0"]);
    let first = tmp.path().join("first72.rlp");
    let out = loupe(&["export", "--to", "72", "--datadir"], &[&reference, &first]);
    assert!(out.status.success(), "{}", text(&out));
    let base = tmp.path().join("base");
    let chain = gen_dir.join("chain.rlp");
    let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
    c.args(["import", "--import.batch", "1", "--import.shrink-after", "0", "--datadir"]);
    let out = c.arg(&base).arg("--genesis").arg(gen_dir.join("genesis.json")).arg(&first);
    assert!(out.output().unwrap().status.success());
    let file = loupe::storage::DB_FILE;
    let fresh = |dir: &Path| {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::copy(base.join(file), dir.join(file)).unwrap();
    };
    let tail = |dir: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
        c.args(["import", "--import.batch", "1", "--import.shrink-after", "1", "--datadir"]);
        c.arg(dir).arg(&chain).stdout(Stdio::piped()).stderr(Stdio::null());
        c
    };
    // Calibration: the whole run, and that it gave pages back.
    let probe = tmp.path().join("probe");
    fresh(&probe);
    let started = Instant::now();
    let out = tail(&probe).output().unwrap();
    let whole = started.elapsed().as_micros() as u64;
    assert!(out.status.success() && text(&out).contains("gave back"), "{}", text(&out));

    let data = tmp.path().join("data");
    let kills = 16;
    let mut in_shrink = 0;
    for i in 0..kills {
        fresh(&data);
        // Over the run's second half, where the last blocks are stored and the file shrinks.
        let at = Duration::from_micros(whole / 2 + whole * (2 * i + 1) / (4 * kills));
        let mut child = tail(&data).spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let printed = child.wait_with_output().unwrap().stdout;
        let printed = String::from_utf8_lossy(&printed);
        // The summary is printed before the free pages are given back.
        in_shrink += usize::from(printed.contains("imported") && !printed.contains("gave back"));
        let what = format!("after a kill at {at:?} of {whole} µs");
        let verify = loupe(&["verify", "--datadir"], &[&data]);
        assert!(verify.status.success(), "{what}: {}", text(&verify));
        let out = tail(&data).output().unwrap();
        assert!(out.status.success(), "{what}: re-run: {}", text(&out));
        tables::assert_same_tables(&data, &reference, &what);
    }
    eprintln!("{in_shrink} of {kills} kills landed while the file shrank ({whole} µs a run)");
    assert!(in_shrink > 0, "no kill of {kills} landed while the file shrank ({whole} µs a run)");
}

/// SIGKILL at moments spread over a compaction of an imported datadir (calibrated by an
/// uninterrupted one) never loses the database: after each kill the datadir holds every row it held, and `verify`
/// passes; a compaction run to the end afterwards packs it.
#[test]
fn a_compaction_killed_at_any_moment_leaves_the_database_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let data = imported_datadir(tmp.path());
    let original = tmp.path().join("original");
    let file = loupe::storage::DB_FILE;
    std::fs::create_dir_all(&original).unwrap();
    std::fs::copy(data.join(file), original.join(file)).unwrap();
    let compact = |dir: &Path| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_loupe"));
        c.args(["db", "compact", "--datadir"]).arg(dir).stdout(Stdio::null()).stderr(Stdio::null());
        c
    };
    // Calibration on a copy: how long a whole compaction takes here.
    let probe = tmp.path().join("probe");
    std::fs::create_dir_all(&probe).unwrap();
    std::fs::copy(data.join(file), probe.join(file)).unwrap();
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
    let data = imported_datadir(tmp.path());
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
