//! What the reading thread hands on: a chain file's next block, prepared, or what stopped it.

use super::SourceError;
use super::block::Prepared;

/// A decoded block with its [`Prepared`] part, or what was wrong with the file there.
pub(super) type Next =
    Result<(u64, alloy_consensus::Block<alloy_consensus::TxEnvelope>, Prepared), SourceError>;

/// What the reading thread found next in a chain file.
pub(super) enum FileItem {
    /// The file did not open.
    Open(std::io::Error),
    /// The era1 file failed a check made before any of its blocks is handed on.
    Refused(SourceError),
    /// The next block, or what was wrong with the bytes there (boxed: a block is large).
    Block(Box<Next>),
}

/// One [`FileItem`] and the index of the file it is from.
pub(super) type Item = (usize, FileItem);
