//! The admin socket `<datadir>/loupe.sock` and `loupe db snapshot`, which copies a datadir
//! consistently whether or not a serving loupe holds it.
//!
//! redb lets one process open a database file, so while `loupe node` or `loupe follow` serves
//! a datadir, `loupe db snapshot` cannot open it. Instead it asks that process, over a Unix
//! socket only the datadir's owner can reach, to take the copy from one read transaction
//! ([`Database::copy_to`]). Serving and importing go on meanwhile. The protocol is one JSON
//! line each way: `{"snapshot": "/abs/dir"}`, then `{"ok": {...}}` or `{"error": "..."}`.
//! `loupe db compact` needs the datadir to itself, so it refuses where that socket answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use eyre::{Result, WrapErr, eyre};
use serde::{Deserialize, Serialize};

use crate::storage::{CompactSummary, CopySummary, DB_FILE, Database};

/// Name of the admin socket inside a datadir.
pub(super) const SOCKET: &str = "loupe.sock";

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    snapshot: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Ok { head: Option<u64>, file: PathBuf, tables: usize, entries: u64, bytes: u64 },
    Error(String),
}

impl From<CopySummary> for Reply {
    fn from(c: CopySummary) -> Self {
        Self::Ok {
            head: c.head,
            file: c.file,
            tables: c.tables,
            entries: c.entries,
            bytes: c.bytes,
        }
    }
}

/// Removes the socket file when the server stops.
#[derive(Debug)]
pub(super) struct AdminSocket {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listens on `<datadir>/loupe.sock` (mode 0600). A socket file already there is stale: this
/// process holds the database, so no other loupe serves the datadir. Must run inside the
/// runtime.
#[cfg(unix)]
pub(super) fn listen(db: Arc<Database>) -> Result<AdminSocket> {
    use std::os::unix::fs::PermissionsExt;
    let datadir = db.path().parent().map(Path::to_path_buf).unwrap_or_default();
    let path = datadir.join(SOCKET);
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)
        .wrap_err_with(|| format!("cannot listen on the admin socket {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .wrap_err_with(|| format!("cannot restrict {}", path.display()))?;
    // One copy at a time: each is a full read of the database.
    let busy = Arc::new(tokio::sync::Mutex::new(()));
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (db, busy) = (db.clone(), busy.clone());
            tokio::spawn(async move {
                if let Err(e) = answer(stream, db, busy).await {
                    tracing::warn!(target: "admin", error = %e, "admin request failed");
                }
            });
        }
    });
    Ok(AdminSocket { path, task })
}

#[cfg(unix)]
async fn answer(
    stream: tokio::net::UnixStream,
    db: Arc<Database>,
    busy: Arc<tokio::sync::Mutex<()>>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    // A request is one short line; refuse anything longer than a path can be.
    tokio::io::BufReader::new(read.take(16 * 1024)).read_line(&mut line).await?;
    let reply = match serde_json::from_str::<Request>(&line) {
        Err(e) => Reply::Error(format!("bad admin request: {e}")),
        Ok(Request { snapshot }) if !snapshot.is_absolute() => {
            Reply::Error(format!("snapshot path {} is not absolute", snapshot.display()))
        }
        Ok(Request { snapshot }) => {
            let _one = busy.lock().await;
            tracing::info!(target: "admin", to = %snapshot.display(), "taking a snapshot");
            let copied = tokio::task::spawn_blocking(move || db.copy_to(&snapshot)).await;
            match copied {
                Ok(Ok(summary)) => {
                    tracing::info!(target: "admin", head = ?summary.head, bytes = summary.bytes, "snapshot written");
                    summary.into()
                }
                Ok(Err(e)) => Reply::Error(e.to_string()),
                Err(e) => Reply::Error(format!("the snapshot task failed: {e}")),
            }
        }
    };
    let mut text = serde_json::to_string(&reply).unwrap_or_default();
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    write.shutdown().await
}

/// `loupe db snapshot`: through the serving process's admin socket when one answers, else by
/// opening the datadir directly.
pub(super) fn snapshot(datadir: &Path, out: &Path) -> Result<CopySummary> {
    if !datadir.join(DB_FILE).exists() {
        return Err(eyre!("{} holds no loupe database", datadir.display()));
    }
    let out = std::path::absolute(out)
        .wrap_err_with(|| format!("cannot resolve the output path {}", out.display()))?;
    #[cfg(unix)]
    if let Ok(stream) = std::os::unix::net::UnixStream::connect(datadir.join(SOCKET)) {
        return through_socket(stream, &out);
    }
    let db = Database::open(datadir).wrap_err_with(|| {
        format!("cannot open {} (is a loupe without an admin socket using it?)", datadir.display())
    })?;
    Ok(db.copy_to(&out)?)
}

/// `loupe db compact`: rewrites a datadir's database file packed ([`Database::compact`]),
/// refusing while a process serves it.
pub(super) fn compact(datadir: &Path, cache_bytes: usize) -> Result<CompactSummary> {
    let db = open_to_compact(datadir, cache_bytes)?;
    db.compact().wrap_err_with(|| {
        format!("compacting {} failed; the datadir keeps a whole database (the old file or the packed one)", datadir.display())
    })
}

/// Opens a datadir for a compaction, which needs it to itself.
fn open_to_compact(datadir: &Path, cache_bytes: usize) -> Result<Database> {
    if !datadir.join(DB_FILE).exists() {
        return Err(eyre!("{} holds no loupe database", datadir.display()));
    }
    #[cfg(unix)]
    if std::os::unix::net::UnixStream::connect(datadir.join(SOCKET)).is_ok() {
        return Err(eyre!(
            "a loupe process serves {} (its admin socket answers): stop it before compacting, \
             or take a packed copy while it serves with `loupe db snapshot --out DIR`",
            datadir.display()
        ));
    }
    Database::open_with_cache(datadir, cache_bytes).wrap_err_with(|| {
        format!(
            "cannot open {} (is another loupe using it? compacting needs the datadir to itself)",
            datadir.display()
        )
    })
}

/// `loupe db stats`: the rows and bytes of every table ([`Database::stats`]) of a datadir no
/// process holds.
pub(super) fn stats(datadir: &Path, cache_bytes: usize) -> Result<crate::storage::DatabaseStats> {
    if !datadir.join(DB_FILE).exists() {
        return Err(eyre!("{} holds no loupe database", datadir.display()));
    }
    let db = Database::open_with_cache(datadir, cache_bytes).wrap_err_with(|| {
        format!(
            "cannot open {} (is a loupe serving it? stats need the datadir to itself: stop \
             it, or take a `loupe db snapshot --out DIR` and look at that)",
            datadir.display()
        )
    })?;
    db.stats().wrap_err_with(|| format!("cannot read the tables of {}", datadir.display()))
}

/// `loupe db compact --in-place`: gives a datadir's free pages back
/// ([`Database::release_free_pages`]), refusing while a process serves it.
pub(super) fn release_free_pages(datadir: &Path, cache_bytes: usize) -> Result<(u64, u64)> {
    let db = open_to_compact(datadir, cache_bytes)?;
    db.release_free_pages().wrap_err_with(|| {
        format!(
            "giving back the free pages of {} failed; every row is still stored",
            datadir.display()
        )
    })
}

#[cfg(unix)]
fn through_socket(mut stream: std::os::unix::net::UnixStream, out: &Path) -> Result<CopySummary> {
    use std::io::{BufRead, Write};
    let mut request = serde_json::to_string(&Request { snapshot: out.to_path_buf() })?;
    request.push('\n');
    stream.write_all(request.as_bytes()).wrap_err("cannot send to the admin socket")?;
    let mut line = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut line)
        .wrap_err("the serving loupe did not answer on its admin socket")?;
    match serde_json::from_str::<Reply>(&line)
        .wrap_err_with(|| format!("unreadable answer from the admin socket: {line:?}"))?
    {
        Reply::Ok { head, file, tables, entries, bytes } => {
            Ok(CopySummary { head, file, tables, entries, bytes })
        }
        Reply::Error(e) => Err(eyre!("the serving loupe could not take the snapshot: {e}")),
    }
}
