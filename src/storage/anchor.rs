//! Writes of an anchored datadir (one that starts at an anchor block, not at genesis).

use alloy_consensus::Header;
use alloy_primitives::B256;
use alloy_rlp::Encodable;
use redb::ReadableTable;
use revm::database::states::StateChangeset;

use super::codec::u64_value;
use super::tables::{self, meta};
use super::{StorageResult, Writer};

impl Writer {
    /// Records the anchor block and the genesis state root of an anchored datadir
    /// ([`meta::ANCHOR`], [`meta::ANCHOR_GENESIS_ROOT`]), once, at its init.
    pub fn set_anchor(&self, anchor: u64, genesis_root: B256) -> StorageResult<()> {
        let mut t = self.txn.open_table(tables::META)?;
        t.insert(meta::ANCHOR, anchor.to_be_bytes().as_slice())?;
        t.insert(meta::ANCHOR_GENESIS_ROOT, genesis_root.as_slice())?;
        Ok(())
    }

    /// Sets the head, safe and finalized markers of a new anchored datadir to its anchor. The
    /// history epochs below the anchor hold nothing (no block is stored there), so none is
    /// closed or indexed on the way, as moving the head up from genesis would do for each.
    pub fn set_anchor_markers(&self, anchor: u64) -> StorageResult<()> {
        {
            let mut t = self.txn.open_table(tables::META)?;
            if t.get(meta::HEAD)?.is_some() {
                return Err(super::StorageError::Config(
                    "an anchored datadir's markers are set once, at its init".into(),
                ));
            }
            t.insert(meta::HEAD, anchor.to_be_bytes().as_slice())?;
        }
        self.advance_head_with_markers(anchor, anchor, anchor)
    }

    /// The anchor block as seen inside this transaction (`None`: the chain starts at genesis).
    pub fn anchor(&self) -> StorageResult<Option<u64>> {
        let t = self.txn.open_table(tables::META)?;
        t.get(meta::ANCHOR)?.map(|v| u64_value("meta", v.value())).transpose()
    }

    /// Stores a header alone (header row, canonical index, hash lookup), without body or
    /// receipts: an anchored datadir's anchor and the ancestors kept for `BLOCKHASH` and the
    /// ommer rules.
    pub fn insert_header(&self, header: &Header, hash: B256) -> StorageResult<()> {
        self.forget_last_block();
        // Held block rows go first, so that this header's rows are the last written.
        self.write_held_blocks()?;
        let number = header.number;
        let mut buf = Vec::with_capacity(512);
        header.encode(&mut buf);
        self.txn.open_table(tables::HEADERS)?.insert(number, buf.as_slice())?;
        self.txn.open_table(tables::CANONICAL)?.insert(number, &hash.0)?;
        self.txn.open_table(tables::HASH_TO_NUMBER)?.insert(&hash.0, number)?;
        Ok(())
    }

    /// Writes the partial state an anchored datadir holds at its anchor block, without history
    /// (nothing reads the state before the anchor). Accounts must be new and carry no wipes.
    pub fn apply_anchor_state(&self, anchor: u64, changes: &StateChangeset) -> StorageResult<()> {
        self.apply(anchor, false, changes)
    }
}
