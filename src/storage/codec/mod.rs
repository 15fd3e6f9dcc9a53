//! Byte layouts of rows, by record kind: accounts and slots (`account`), transactions and
//! block-keyed keys (`tx`), receipts and logs (`receipts`); see [`super::tables`]. History keys
//! are laid out in `storage::history::keys`.

pub mod account;
pub mod receipts;
pub mod tx;

use crate::storage::StorageError;

/// A `u64` stored as 8 big-endian bytes; another length is a corrupt row of `table`.
pub(crate) fn u64_value(table: &'static str, b: &[u8]) -> Result<u64, StorageError> {
    let arr: [u8; 8] = b.try_into().map_err(|_| StorageError::Corrupt {
        table,
        detail: format!("{} bytes, want 8", b.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}
