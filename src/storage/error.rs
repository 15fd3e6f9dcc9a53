//! Storage-layer errors.

use alloy_primitives::B256;

/// Result alias for the storage layer.
pub type StorageResult<T> = Result<T, StorageError>;

/// Errors from the archive database.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The datadir could not be created or read.
    #[error("datadir {path}: {error}")]
    Io {
        /// The path involved.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// redb failed (I/O, corruption, or a transaction problem).
    #[error("database: {0}")]
    Db(redb::Error),
    /// A stored record did not decode; the file is corrupt or from another version.
    #[error("corrupt record in table {table}: {detail}")]
    Corrupt {
        /// Table name.
        table: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The database was written by a loupe with another storage format.
    #[error(
        "database format version {found} is not the supported version {supported}; use a new datadir or the loupe that wrote it"
    )]
    Schema {
        /// Version in the file.
        found: u64,
        /// Version this build reads.
        supported: u64,
    },
    /// A block could not be unwound.
    #[error("cannot unwind: {0}")]
    Unwind(&'static str),
    /// A block is older than the change lists the datadir keeps, so it cannot be unwound.
    #[error(
        "cannot unwind block {block}: change lists are kept for the newest {depth} blocks, and the oldest kept is block {floor}"
    )]
    UnwindTooDeep {
        /// The block asked to be unwound.
        block: u64,
        /// The oldest block whose change lists are kept.
        floor: u64,
        /// Blocks kept behind the head (`meta::UNWIND_DEPTH`).
        depth: u64,
    },
    /// A block imported in a commit group whose state root was checked once, at its last
    /// block, cannot be unwound: the trie is not kept at the blocks before that one.
    #[error(
        "cannot unwind block {block}: blocks up to {root_at} were imported with one state root per commit group (`loupe import --state-root group`), so the trie is kept from block {root_at} on and nothing at or below it can be unwound"
    )]
    UnwindGrouped {
        /// The block asked to be unwound.
        block: u64,
        /// The last block whose root was checked for a whole group.
        root_at: u64,
    },
    /// A storage setting is out of range (the history epoch length).
    #[error("invalid storage setting: {0}")]
    Config(String),
    /// The head marker was asked to move back other than by unwinding blocks.
    #[error("the head is block {head}; moving it back to block {to} takes an unwind")]
    HeadBack {
        /// The current head.
        head: u64,
        /// The block asked for.
        to: u64,
    },
    /// The disk holding the datadir is full: nothing was committed past the last durable
    /// commit, and the node keeps serving what it has.
    #[error(
        "the disk is full: writing {path} failed ({error}); free space and run the import again (it resumes after the last committed block)"
    )]
    DiskFull {
        /// The file being written.
        path: String,
        /// The I/O error (`StorageFull`).
        error: std::io::Error,
    },
    /// A segment file could not be read or written.
    #[error("segment file {path}: {error}")]
    SegmentIo {
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A segment file is damaged.
    #[error("segment file {path} is corrupt: {detail}")]
    SegmentCorrupt {
        /// The file.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// A segment file of another format version.
    #[error("segment file {path} has format version {found}; this build reads version {supported}")]
    SegmentVersion {
        /// The file.
        path: String,
        /// Version in the file.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// Rows were given to a segment out of key order (a bug, never the data's fault).
    #[error("segment file {path}: rows out of key order")]
    SegmentOrder {
        /// The file.
        path: String,
    },
    /// The state below the anchor of an anchored datadir was asked for: it holds the state at
    /// its anchor block and after, nothing before.
    #[error(
        "the state at block {block} is not held: this datadir starts at anchor block {anchor} and holds only the state of a witness from there on"
    )]
    BelowAnchor {
        /// The block asked for.
        block: u64,
        /// The anchor block.
        anchor: u64,
    },
    /// Code referenced by an account is missing.
    #[error("bytecode {0} referenced by an account is not stored")]
    MissingCode(B256),
}

impl revm::database::DBErrorMarker for StorageError {}

impl StorageError {
    /// A redb error, with a full disk told apart ([`StorageError::DiskFull`]; redb then refuses
    /// every further operation of the handle with "Previous I/O error occurred").
    fn from_redb(e: redb::Error) -> Self {
        match e {
            redb::Error::Io(error) if error.kind() == std::io::ErrorKind::StorageFull => {
                Self::DiskFull { path: "the database file (loupe.redb)".into(), error }
            }
            other => Self::Db(other),
        }
    }

    /// An I/O error on `path`: [`StorageError::DiskFull`] when the disk is full, else
    /// [`StorageError::SegmentIo`].
    pub fn io(path: &std::path::Path, error: std::io::Error) -> Self {
        let path = path.display().to_string();
        if error.kind() == std::io::ErrorKind::StorageFull {
            Self::DiskFull { path, error }
        } else {
            Self::SegmentIo { path, error }
        }
    }

    /// Whether this is a full disk (redb's own I/O errors included).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::DiskFull { .. } => true,
            Self::Db(redb::Error::Io(e)) => e.kind() == std::io::ErrorKind::StorageFull,
            _ => false,
        }
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StorageError {
            fn from(e: $t) -> Self { Self::from_redb(e.into()) }
        }
    )*};
}

impl From<redb::Error> for StorageError {
    fn from(e: redb::Error) -> Self {
        Self::from_redb(e)
    }
}
from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
    redb::CompactionError
);
