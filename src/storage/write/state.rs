//! [`WriterState`]: the state at the head of an open write transaction, as a block executes
//! on it.

use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256, keccak256};
use redb::ReadableTable;
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::state::AccountInfo;

use super::Writer;
use crate::storage::codec::account::{HashedAccount, decode_slot, hashed_storage_key};
use crate::storage::tables;
use crate::storage::{StorageError, StorageResult};

impl Writer {
    /// The state at this transaction's head, its uncommitted changes included.
    pub fn state(&self) -> StorageResult<WriterState<'_>> {
        Ok(WriterState::new(self, self.head()?.unwrap_or(0)))
    }
}

/// The state at the head of an open write transaction, uncommitted changes included, as a revm
/// `DatabaseRef`: what a block executes on when it follows blocks unwound or imported in the
/// same transaction (a reorg). Tables are opened per read, so it never holds one open while the
/// writer writes.
pub struct WriterState<'a> {
    writer: &'a Writer,
    head: u64,
}

impl std::fmt::Debug for WriterState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterState").field("head", &self.head).finish_non_exhaustive()
    }
}

impl<'a> WriterState<'a> {
    fn new(writer: &'a Writer, head: u64) -> Self {
        Self { writer, head }
    }
}

impl DatabaseRef for WriterState<'_> {
    type Error = StorageError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        let t = self.writer.txn.open_table(tables::HASHED_ACCOUNTS)?;
        let row = t.get(&keccak256(address).0)?;
        let row = row.map(|v| HashedAccount::decode(v.value(), "hashed_accounts")).transpose()?;
        Ok(row.map(|h| h.account).map(|a| AccountInfo {
            balance: a.balance,
            nonce: a.nonce,
            code_hash: if a.code_hash.is_zero() { KECCAK256_EMPTY } else { a.code_hash },
            account_id: None,
            code: None,
        }))
    }

    fn code_by_hash_ref(&self, hash: B256) -> Result<Bytecode, Self::Error> {
        if hash == KECCAK256_EMPTY || hash.is_zero() {
            return Ok(Bytecode::default());
        }
        let t = self.writer.txn.open_table(tables::BYTECODES)?;
        let v = t.get(&hash.0)?.ok_or(StorageError::MissingCode(hash))?;
        Ok(Bytecode::new_raw(v.value().to_vec().into()))
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        let t = self.writer.txn.open_table(tables::HASHED_STORAGE)?;
        let key = hashed_storage_key(&keccak256(address), &keccak256(index.to_be_bytes::<32>()));
        match t.get(&key)? {
            Some(v) => Ok(decode_slot(v.value(), "hashed_storage")?.1),
            None => Ok(U256::ZERO),
        }
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        if number > self.head {
            return Ok(B256::ZERO);
        }
        Ok(self.writer.canonical_hash(number)?.unwrap_or_default())
    }
}
