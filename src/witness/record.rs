//! [`Recorder`]: a state view that notes every account, slot, code and block hash read through it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::{Address, B256, U256};
use revm::bytecode::Bytecode;
use revm::database::DatabaseRef;
use revm::state::AccountInfo;

/// What a block's execution read from its parent's state.
#[derive(Debug, Default, Clone)]
pub(super) struct ReadKeys {
    /// Every account read, with the slots read of each.
    pub(super) accounts: BTreeMap<Address, BTreeSet<U256>>,
    /// The hashes of the code loaded (executed, or read by `EXTCODE*`).
    pub(super) codes: BTreeSet<B256>,
    /// The oldest block whose hash `BLOCKHASH` read.
    pub(super) oldest_hash: Option<u64>,
}

/// Wraps a state view and records what is read through it. Code is never handed out with an
/// account, so that only code the EVM asks for by hash is recorded as needed.
#[derive(Debug)]
pub(super) struct Recorder<'a, DB> {
    inner: &'a DB,
    reads: RefCell<ReadKeys>,
}

impl<'a, DB> Recorder<'a, DB> {
    /// Records reads of `inner`.
    pub(super) fn new(inner: &'a DB) -> Self {
        Self { inner, reads: RefCell::new(ReadKeys::default()) }
    }

    /// What was read so far.
    pub(super) fn into_reads(self) -> ReadKeys {
        self.reads.into_inner()
    }
}

impl<DB: DatabaseRef> DatabaseRef for Recorder<'_, DB> {
    type Error = DB::Error;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        self.reads.borrow_mut().accounts.entry(address).or_default();
        let mut info = self.inner.basic_ref(address)?;
        if let Some(info) = &mut info {
            info.code = None;
        }
        Ok(info)
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        self.reads.borrow_mut().codes.insert(code_hash);
        self.inner.code_by_hash_ref(code_hash)
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        self.reads.borrow_mut().accounts.entry(address).or_default().insert(index);
        self.inner.storage_ref(address, index)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        let mut reads = self.reads.borrow_mut();
        reads.oldest_hash = Some(reads.oldest_hash.map_or(number, |n| n.min(number)));
        drop(reads);
        self.inner.block_hash_ref(number)
    }
}
