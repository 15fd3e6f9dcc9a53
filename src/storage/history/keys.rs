//! The byte layout of history keys: a history row is keyed `epoch ++ entity ++ block`, an epoch
//! index row `entity ++ run`, and an entity-first segment file keeps `entity ++ epoch ++ block`;
//! the epoch length ([`Epochs`]) that maps a block to its epoch. Everything that builds or takes
//! apart such a key is here (`storage::history::lookup` reads them, `storage::history::index`
//! keeps the index, `storage::segments` freezes them).

use alloy_primitives::B256;
use redb::{ReadableTable, WriteTransaction};

use crate::storage::codec::account::hashed_storage_key;
use crate::storage::codec::u64_value;
use crate::storage::tables::{self, meta};
use crate::storage::{StorageError, StorageResult};

/// Blocks per epoch of a datadir created without [`EPOCH_ENV`].
pub const DEFAULT_EPOCH_LEN: u64 = 128;

/// Epochs one index row covers: its value has one bit per epoch (bit `i` for epoch
/// `run * EPOCHS_PER_RUN + i`).
pub const EPOCHS_PER_RUN: u32 = 64;

/// The run of `epoch`, as stored in an index key.
pub fn run_of(epoch: u32) -> u32 {
    epoch / EPOCHS_PER_RUN
}

/// The bit of `epoch` in its run's index row.
pub fn epoch_bit(epoch: u32) -> u64 {
    1 << (epoch % EPOCHS_PER_RUN)
}

/// The epochs whose bits are set in `bits`, the index row of `run`.
pub fn run_epochs(run: u32, bits: u64) -> impl Iterator<Item = u32> {
    (0..EPOCHS_PER_RUN).filter(move |i| bits & (1 << i) != 0).map(move |i| run * EPOCHS_PER_RUN + i)
}

/// Environment variable read when a datadir is created: its epoch length in blocks (tests use
/// small epochs so that every property crosses epoch boundaries). Ignored afterwards: the
/// length is kept in [`meta::HISTORY_EPOCH`].
pub const EPOCH_ENV: &str = "LOUPE_HISTORY_EPOCH";

/// The epoch length of a datadir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epochs {
    /// Blocks per epoch (at least 1).
    pub len: u64,
}

impl Epochs {
    /// The epoch of `block`.
    pub fn of(self, block: u64) -> u32 {
        u32::try_from(block / self.len).unwrap_or(u32::MAX)
    }

    /// The history key of `key` at `block`: `epoch ++ key ++ block`.
    pub fn history_key<const K: usize, const H: usize>(self, key: &[u8; K], block: u64) -> [u8; H] {
        row_key(self.of(block), key, block)
    }

    /// The length for a new datadir: [`EPOCH_ENV`] if set to a positive number, else
    /// [`DEFAULT_EPOCH_LEN`].
    pub(in crate::storage) fn for_new_datadir() -> StorageResult<Self> {
        match std::env::var(EPOCH_ENV) {
            Ok(v) => match v.trim().parse::<u64>() {
                Ok(len) if len > 0 => Ok(Self { len }),
                _ => Err(StorageError::Config(format!(
                    "{EPOCH_ENV}={v:?} is not a positive number of blocks"
                ))),
            },
            Err(_) => Ok(Self { len: DEFAULT_EPOCH_LEN }),
        }
    }

    /// The length recorded in `meta`.
    pub(in crate::storage) fn read(
        meta: &impl ReadableTable<&'static str, &'static [u8]>,
    ) -> StorageResult<Self> {
        let len = meta
            .get(meta::HISTORY_EPOCH)?
            .map(|v| u64_value("meta", v.value()))
            .transpose()?
            .filter(|len| *len > 0)
            .ok_or_else(|| StorageError::Corrupt {
                table: "meta",
                detail: "no history epoch length".into(),
            })?;
        Ok(Self { len })
    }
}

/// The epoch length of the database `txn` writes.
pub fn history_epochs(txn: &WriteTransaction) -> StorageResult<Epochs> {
    Epochs::read(&txn.open_table(tables::META)?)
}

/// `epoch ++ key ++ block`, the key of a history row (`H` = `K` + 12).
pub fn row_key<const K: usize, const H: usize>(epoch: u32, key: &[u8; K], block: u64) -> [u8; H] {
    const { assert!(H == K + 12) };
    let mut h = [0u8; H];
    h[..4].copy_from_slice(&epoch.to_be_bytes());
    h[4..4 + K].copy_from_slice(key);
    h[4 + K..].copy_from_slice(&block.to_be_bytes());
    h
}

/// `key ++ run`, the key of an index row (`I` = `K` + 4; see [`run_of`]).
pub fn index_key<const K: usize, const I: usize>(key: &[u8; K], run: u32) -> [u8; I] {
    const { assert!(I == K + 4) };
    let mut k = [0u8; I];
    k[..K].copy_from_slice(key);
    k[K..].copy_from_slice(&run.to_be_bytes());
    k
}

/// The entity key inside an index row key.
pub fn index_entity<const K: usize, const I: usize>(key: &[u8; I]) -> [u8; K] {
    const { assert!(I == K + 4) };
    let mut k = [0u8; K];
    k.copy_from_slice(&key[..K]);
    k
}

/// The run of an index row key.
pub fn index_run<const I: usize>(key: &[u8; I]) -> u32 {
    let mut r = [0u8; 4];
    r.copy_from_slice(&key[I - 4..]);
    u32::from_be_bytes(r)
}

/// The block of a history row key.
pub fn row_block<const H: usize>(key: &[u8; H]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[H - 8..]);
    u64::from_be_bytes(b)
}

/// The entity key inside a history row key.
pub fn row_entity<const K: usize, const H: usize>(key: &[u8; H]) -> [u8; K] {
    let mut k = [0u8; K];
    k.copy_from_slice(&key[4..4 + K]);
    k
}

/// The lowest and highest possible `H`-byte history keys of epochs `first..=last`: every row
/// of those epochs lies between them.
pub fn epochs_bounds<const H: usize>(first: u32, last: u32) -> ([u8; H], [u8; H]) {
    let mut lo = [0u8; H];
    lo[..EPOCH_BYTES].copy_from_slice(&first.to_be_bytes());
    let mut hi = [0xffu8; H];
    hi[..EPOCH_BYTES].copy_from_slice(&last.to_be_bytes());
    (lo, hi)
}

/// The epoch of a history row key.
pub fn row_epoch<const H: usize>(key: &[u8; H]) -> u32 {
    // Every history key is at least an epoch long.
    key_epoch(key).unwrap_or_default()
}

/// Bytes of a history key's epoch (first).
pub const EPOCH_BYTES: usize = 4;
/// Bytes of a history key's block (last).
pub const BLOCK_BYTES: usize = 8;

/// A history row key, `epoch ++ entity ++ block`, as an entity-first file keeps it:
/// `entity ++ epoch ++ block` (see [`crate::storage::segments::Kind::is_entity_first`]). Ordered by entity, then block.
pub fn entity_first_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len());
    if key.len() < EPOCH_BYTES + BLOCK_BYTES {
        out.extend_from_slice(key);
        return out;
    }
    let block_at = key.len() - BLOCK_BYTES;
    out.extend_from_slice(&key[EPOCH_BYTES..block_at]);
    out.extend_from_slice(&key[..EPOCH_BYTES]);
    out.extend_from_slice(&key[block_at..]);
    out
}

/// The history row key of an entity-first file's key (the inverse of [`entity_first_key`]), into
/// `out`.
pub(crate) fn history_key_into(key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if key.len() < EPOCH_BYTES + BLOCK_BYTES {
        out.extend_from_slice(key);
        return;
    }
    let epoch_at = key.len() - BLOCK_BYTES - EPOCH_BYTES;
    out.extend_from_slice(&key[epoch_at..epoch_at + EPOCH_BYTES]);
    out.extend_from_slice(&key[..epoch_at]);
    out.extend_from_slice(&key[epoch_at + EPOCH_BYTES..]);
}

/// The history row key of an entity-first file's key: the inverse of [`entity_first_key`].
pub fn table_key_of_entity_first(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len());
    history_key_into(key, &mut out);
    out
}

/// The epoch of a history row key (`epoch ++ …`).
pub fn key_epoch(key: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(key.get(..EPOCH_BYTES)?.try_into().ok()?))
}

/// `epoch ++ keccak(address) ++ block`: key of [`crate::storage::tables::HASHED_ACCOUNT_HISTORY`].
pub fn hashed_account_history_key(epochs: Epochs, hashed_address: &B256, block: u64) -> [u8; 44] {
    epochs.history_key(&hashed_address.0, block)
}

/// `epoch ++ keccak(address) ++ keccak(slot) ++ block`: key of
/// [`crate::storage::tables::HASHED_STORAGE_HISTORY`].
pub fn hashed_storage_history_key(
    epochs: Epochs,
    hashed_address: &B256,
    hashed_slot: &B256,
    block: u64,
) -> [u8; 76] {
    epochs.history_key(&hashed_storage_key(hashed_address, hashed_slot), block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys_take_apart() {
        let epochs = Epochs { len: 1024 };
        let k: [u8; 45] = epochs.history_key(&[3u8; 33], 5000);
        assert_eq!((row_epoch(&k), row_block(&k)), (4, 5000));
        assert_eq!(row_entity::<33, 45>(&k), [3u8; 33]);
    }
}
