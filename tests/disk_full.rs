//! A full disk: the execution-apis chain imported into a datadir on a small tmpfs the test
//! mounts. Whether the import stops at the free-space reserve (`--db.min-free-mb`) or redb
//! itself runs out of space mid-commit, the error says the disk is full and where, `loupe
//! verify` passes on what was kept, and the import completes once space is freed.
//!
//! Mounting needs root (CAP_SYS_ADMIN); outside CI a machine that refuses it skips the test
//! with a note, under `CI=true` it fails.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;

fn loupe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A tmpfs of `size` mounted at a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("mnt");
        std::fs::create_dir(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self { dir, _parent: parent }),
            other => {
                let msg = format!("cannot mount a tmpfs (needs root): {other:?}");
                let ci =
                    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
                assert!(!ci, "{msg}");
                eprintln!("note: skipping test: {msg}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).output();
    }
}

fn import(data: &Path, fx: &Path, reserve_mb: &str) -> Output {
    loupe(&[
        "import",
        "--datadir",
        data.to_str().unwrap(),
        "--chain",
        fx.join("genesis.json").to_str().unwrap(),
        fx.join("chain.rlp").to_str().unwrap(),
        "--import.batch",
        "1",
        "--import.sync-every",
        "1",
        "--db.min-free-mb",
        reserve_mb,
    ])
}

fn head(data: &Path) -> u64 {
    let db = loupe::storage::Database::open(data).unwrap();
    db.begin_read().unwrap().head().unwrap().unwrap_or(0)
}

/// One case: a tmpfs of `size`, a filler of `filler` bytes, a reserve of `reserve_mb`; the
/// first import must stop with a full disk.
fn case(size: &str, filler: usize, reserve_mb: &str) {
    let Some(fx) = support::fixtures() else { return };
    let Some(fs) = Tmpfs::mount(size) else { return };
    let data = fs.dir.join("data");
    let fill = fs.dir.join("filler");
    std::fs::write(&fill, vec![7u8; filler]).unwrap();
    let out = import(&data, &fx, reserve_mb);
    assert!(!out.status.success(), "the import was to run out of space: {}", text(&out));
    let said = text(&out);
    assert!(said.contains("the disk is full"), "{said}");
    assert!(
        said.contains(fs.dir.to_str().unwrap()) || said.contains("loupe.redb"),
        "where: {said}"
    );
    let kept = head(&data);
    assert!(kept < 54, "stopped before the end: head {kept}");
    let verify = loupe(&["verify", "--datadir", data.to_str().unwrap(), "--history"]);
    assert!(verify.status.success(), "verify after a full disk: {}", text(&verify));
    std::fs::remove_file(&fill).unwrap();
    let out = import(&data, &fx, reserve_mb);
    assert!(out.status.success(), "the import resumes with space freed: {}", text(&out));
    assert_eq!(head(&data), 54);
    let verify = loupe(&["verify", "--datadir", data.to_str().unwrap(), "--history"]);
    assert!(verify.status.success(), "{}", text(&verify));
}

/// The reserve stops the writes before redb runs out: nothing of redb's is damaged. The first
/// import has 1,280 KiB, less the 1-MiB reserve; the second all 4 MiB. A whole import of the
/// chain peaks at about 1.4 MiB (0.9 MiB of file, then the packed copy beside it), and how far
/// its file grows depends on how long readers hold freed pages, so the second import gets about
/// three times that.
#[test]
fn the_free_space_reserve_stops_an_import_that_resumes_when_space_is_freed() {
    case("4096k", 2816 * 1024, "1");
}

/// Without a reserve redb itself runs out of space in the middle of a commit; the datadir
/// falls back to its last commit, all of them durable here. The first import has 384 KiB; the
/// second all 4 MiB (a 1,536-KiB tmpfs left the second import too little headroom on a loaded
/// machine).
#[test]
fn running_out_of_space_mid_commit_is_named_and_the_import_resumes() {
    case("4096k", 3712 * 1024, "0");
}
