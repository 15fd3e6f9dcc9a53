//! The dev chain's datadir is built whole or not at all: genesis and sample history are built
//! in a scratch datadir inside it ([`SCRATCH`]) and moved into place once complete, the
//! database file last, so a `loupe dev` killed at any moment of its first build leaves either
//! no chain (the next start builds it again) or the whole one, never a partial history to serve.

use std::path::Path;

use super::{DevError, DevFork, HISTORY_BLOCKS, build_sample_history};
use crate::import::init_genesis;
use crate::storage::{DB_FILE, Database};

/// The scratch datadir inside the dev datadir where a build runs.
pub const SCRATCH: &str = ".building";

/// Whether the dev chain stored in `db` is complete: its sample history (blocks 1 to
/// [`HISTORY_BLOCKS`], each stored whole, in order) is all there. A datadir that is not was
/// left by an interrupted build of a loupe before the scratch build, or holds no genesis yet.
pub fn is_complete(db: &Database) -> Result<bool, DevError> {
    Ok(db.begin_read()?.head()?.is_some_and(|h| h >= HISTORY_BLOCKS))
}

/// Removes the scratch datadir a build killed after moving its chain into place left in `dir`
/// (the chain is whole; the scratch holds nothing of use).
pub fn remove_scratch(dir: &Path) -> Result<(), DevError> {
    let scratch = dir.join(SCRATCH);
    match std::fs::remove_dir_all(&scratch) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(DevError::io(format!("cannot remove {}", scratch.display()), e))
        }
        _ => Ok(()),
    }
}

/// Builds the dev chain of `fork` in `dir`'s scratch datadir and moves it into `dir`, replacing
/// the database there (an incomplete or outdated dev chain). Returns the blocks built. Nothing
/// else in `dir` is touched until the build is complete; the database file is moved last,
/// after every file the database refers to, and the move is made durable.
pub fn build_dev_datadir(dir: &Path, fork: DevFork) -> Result<u64, DevError> {
    let io = |what: &str, path: &Path, e| DevError::io(format!("{what} {}", path.display()), e);
    let scratch = dir.join(SCRATCH);
    if scratch.exists() {
        // What an interrupted build left.
        std::fs::remove_dir_all(&scratch).map_err(|e| io("cannot remove", &scratch, e))?;
    }
    let built = {
        let db = Database::open(&scratch)?;
        let (spec, _) = init_genesis(&db, &fork.genesis_json())?;
        build_sample_history(&db, &spec)?
    };
    // The database's other files (its segment store) first, then the database itself.
    let entries = std::fs::read_dir(&scratch).map_err(|e| io("cannot read", &scratch, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io("cannot read", &scratch, e))?;
        if entry.file_name() == DB_FILE {
            continue;
        }
        let to = dir.join(entry.file_name());
        let is_dir = to.is_dir();
        let removed = if is_dir { std::fs::remove_dir_all(&to) } else { std::fs::remove_file(&to) };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot replace", &to, e)),
        }
        std::fs::rename(entry.path(), &to).map_err(|e| io("cannot move into place", &to, e))?;
    }
    let to = dir.join(DB_FILE);
    std::fs::rename(scratch.join(DB_FILE), &to)
        .map_err(|e| io("cannot move into place", &to, e))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("cannot sync", dir, e))?;
    std::fs::remove_dir_all(&scratch).map_err(|e| io("cannot remove", &scratch, e))?;
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_replaces_an_incomplete_chain_and_leaves_no_scratch() {
        let dir = tempfile::tempdir().unwrap();
        // An incomplete chain: the genesis only.
        {
            let db = Database::open(dir.path()).unwrap();
            init_genesis(&db, &DevFork::Osaka.genesis_json()).unwrap();
            assert!(!is_complete(&db).unwrap());
        }
        // A scratch datadir an interrupted build left.
        std::fs::create_dir_all(dir.path().join(SCRATCH)).unwrap();
        std::fs::write(dir.path().join(SCRATCH).join(DB_FILE), b"torn").unwrap();
        assert_eq!(build_dev_datadir(dir.path(), DevFork::Osaka).unwrap(), HISTORY_BLOCKS);
        assert!(!dir.path().join(SCRATCH).exists());
        let db = Database::open(dir.path()).unwrap();
        assert!(is_complete(&db).unwrap());
        assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(HISTORY_BLOCKS));
    }
}
