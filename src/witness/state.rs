//! [`WitnessState`]: the parent's state as a revm `DatabaseRef` over a [`Witness`], recording
//! every account, slot and header the block reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use alloy_consensus::Header;
use alloy_primitives::{Address, B256, U256, keccak256};
use alloy_rlp::Decodable;
use alloy_trie::{EMPTY_ROOT_HASH, TrieAccount};
use revm::database::DatabaseRef;
use revm::primitives::KECCAK_EMPTY;
use revm::state::{AccountInfo, Bytecode};

use super::nodes::TrieReader;
use super::{Witness, WitnessError};

/// What the block read from the parent state, as plain values.
#[derive(Debug, Clone, Default)]
pub struct StateReads {
    /// Every account read: `None` when the parent state has none at that address. The code
    /// is attached where the witness holds it.
    pub accounts: BTreeMap<Address, Option<AccountInfo>>,
    /// Every storage slot read, with its value in the parent state (zero when unset).
    pub storage: BTreeMap<Address, BTreeMap<U256, U256>>,
    /// The ancestor headers used (the parent and those BLOCKHASH reached), by number.
    pub headers: BTreeMap<u64, Header>,
}

/// The parent state of a block, read from a witness.
///
/// `basic_ref` walks the account trie from the parent header's state root, `storage_ref` the
/// account's storage trie, `code_by_hash_ref` the witness's codes and `block_hash_ref` the
/// headers chained by parent hashes from the parent. A node needed but absent is an error
/// naming its hash. The first such error is also kept ([`WitnessState::first_error`]), since
/// the EVM turns database errors into strings.
#[derive(Debug)]
pub struct WitnessState {
    reader: TrieReader,
    parent: Header,
    parent_hash: B256,
    by_hash: HashMap<B256, Header>,
    storage_roots: Mutex<HashMap<Address, B256>>,
    reads: Mutex<StateReads>,
    first_error: Mutex<Option<WitnessError>>,
    /// geth's reading of an incomplete witness: a read through a node the witness lacks gives
    /// an absent account or an unset slot ([`WitnessState::missing_as_absent`]).
    missing_as_absent: bool,
    /// The reads taken as absent that way, each naming the read and the node.
    unresolved: Mutex<Vec<String>>,
}

impl WitnessState {
    /// The state after `parent` (whose hash is `parent_hash`), from `witness`.
    pub fn new(witness: Arc<Witness>, parent: Header) -> Self {
        let parent_hash = parent.hash_slow();
        let by_hash = witness.headers.iter().map(|h| (h.hash_slow(), h.clone())).collect();
        let mut reads = StateReads::default();
        reads.headers.insert(parent.number, parent.clone());
        Self {
            reader: TrieReader::new(witness),
            parent,
            parent_hash,
            by_hash,
            storage_roots: Mutex::default(),
            reads: Mutex::new(reads),
            first_error: Mutex::default(),
            missing_as_absent: false,
            unresolved: Mutex::default(),
        }
    }

    /// Reads through a node the witness lacks as absent (an account) or unset (a slot) instead
    /// of failing, as geth's state does with a failed trie read; each such read is noted
    /// ([`WitnessState::unresolved`]). The run's checks against the header still decide: a
    /// write through the missing node fails, and a read that mattered changes a root.
    pub fn missing_as_absent(mut self, on: bool) -> Self {
        self.missing_as_absent = on;
        self
    }

    /// The reads taken as absent under [`WitnessState::missing_as_absent`].
    pub fn unresolved(&self) -> Vec<String> {
        self.unresolved.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// A read of `key` under `root`; a missing node is an absent value where so configured.
    fn lookup(
        &self,
        root: B256,
        key: &[u8],
        needed_for: &dyn Fn() -> String,
    ) -> Result<Option<Vec<u8>>, WitnessError> {
        match self.reader.get(root, key, needed_for) {
            Err(WitnessError::MissingNode { hash, needed_for }) if self.missing_as_absent => {
                if let Ok(mut u) = self.unresolved.lock() {
                    u.push(format!("{needed_for} (node {hash})"));
                }
                Ok(None)
            }
            other => other,
        }
    }

    /// The parent header.
    pub fn parent(&self) -> &Header {
        &self.parent
    }

    /// The witness read.
    pub fn witness(&self) -> &Witness {
        self.reader.witness()
    }

    /// What was read so far.
    pub fn reads(&self) -> StateReads {
        self.reads.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The first error a read returned, if any.
    pub fn first_error(&self) -> Option<WitnessError> {
        self.first_error.lock().ok().and_then(|mut e| e.take())
    }

    fn keep<T>(&self, r: Result<T, WitnessError>) -> Result<T, WitnessError> {
        if let Err(e) = &r
            && let Ok(mut first) = self.first_error.lock()
            && first.is_none()
        {
            *first = Some(clone_error(e));
        }
        r
    }

    /// The witness's trie nodes the run resolved so far (reading and updating the tries): a
    /// witness that holds only these re-executes the block.
    pub fn nodes_used(&self) -> std::collections::HashSet<B256> {
        self.reader.used()
    }

    /// Notes that the post-state root resolved the witness's node `hash`.
    pub(crate) fn note_used(&self, hash: B256) {
        self.reader.note_used(hash);
    }

    /// The parent state's account at `address`, without recording the read.
    pub(crate) fn trie_account(
        &self,
        address: Address,
    ) -> Result<Option<TrieAccount>, WitnessError> {
        let key = keccak256(address);
        let needed_for = || format!("read account {address}");
        let Some(value) = self.lookup(self.parent.state_root, key.as_slice(), &needed_for)? else {
            return Ok(None);
        };
        let account = TrieAccount::decode(&mut value.as_slice()).map_err(|e| {
            WitnessError::BadValue { what: format!("account {address}"), message: e.to_string() }
        })?;
        Ok(Some(account))
    }

    /// The parent state's storage root of `address` (empty for an absent account).
    pub(crate) fn storage_root(&self, address: Address) -> Result<B256, WitnessError> {
        if let Some(root) = self.storage_roots.lock().ok().and_then(|m| m.get(&address).copied()) {
            return Ok(root);
        }
        let root = self.trie_account(address)?.map_or(EMPTY_ROOT_HASH, |a| a.storage_root);
        if let Ok(mut m) = self.storage_roots.lock() {
            m.insert(address, root);
        }
        Ok(root)
    }

    fn basic(&self, address: Address) -> Result<Option<AccountInfo>, WitnessError> {
        let info = self.trie_account(address)?.map(|a| {
            if let Ok(mut m) = self.storage_roots.lock() {
                m.insert(address, a.storage_root);
            }
            let code = (a.code_hash != KECCAK_EMPTY)
                .then(|| self.witness().codes.get(&a.code_hash))
                .flatten()
                .map(|c| Bytecode::new_raw(c.clone()));
            AccountInfo {
                balance: a.balance,
                nonce: a.nonce,
                code_hash: a.code_hash,
                account_id: None,
                code,
            }
        });
        if let Ok(mut r) = self.reads.lock() {
            r.accounts.insert(address, info.clone());
        }
        Ok(info)
    }

    fn storage(&self, address: Address, index: U256) -> Result<U256, WitnessError> {
        let root = self.storage_root(address)?;
        let key = keccak256(B256::from(index));
        let needed_for = || format!("read slot {index:#x} of {address}");
        let value = match self.lookup(root, key.as_slice(), &needed_for)? {
            None => U256::ZERO,
            Some(v) => U256::decode(&mut v.as_slice()).map_err(|e| WitnessError::BadValue {
                what: format!("slot {index:#x} of {address}"),
                message: e.to_string(),
            })?,
        };
        if let Ok(mut r) = self.reads.lock() {
            r.storage.entry(address).or_default().insert(index, value);
        }
        Ok(value)
    }

    fn block_hash(&self, number: u64) -> Result<B256, WitnessError> {
        if number > self.parent.number {
            return Ok(B256::ZERO);
        }
        let mut hash = self.parent_hash;
        let mut header = &self.parent;
        while header.number > number {
            hash = header.parent_hash;
            header = self
                .by_hash
                .get(&hash)
                .ok_or(WitnessError::MissingHeader { number: header.number - 1 })?;
        }
        if let Ok(mut r) = self.reads.lock() {
            r.headers.entry(header.number).or_insert_with(|| header.clone());
        }
        Ok(hash)
    }
}

impl DatabaseRef for WitnessState {
    type Error = WitnessError;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Self::Error> {
        self.keep(self.basic(address))
    }

    fn code_by_hash_ref(&self, code_hash: B256) -> Result<Bytecode, Self::Error> {
        if code_hash == KECCAK_EMPTY || code_hash.is_zero() {
            return Ok(Bytecode::default());
        }
        self.keep(
            self.witness()
                .codes
                .get(&code_hash)
                .map(|c| Bytecode::new_raw(c.clone()))
                .ok_or(WitnessError::MissingCode { hash: code_hash }),
        )
    }

    fn storage_ref(&self, address: Address, index: U256) -> Result<U256, Self::Error> {
        self.keep(self.storage(address, index))
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Self::Error> {
        self.keep(self.block_hash(number))
    }
}

/// A copy of a read error (the ones reads return; others are kept as their message).
fn clone_error(e: &WitnessError) -> WitnessError {
    match e {
        WitnessError::MissingNode { hash, needed_for } => {
            WitnessError::MissingNode { hash: *hash, needed_for: needed_for.clone() }
        }
        WitnessError::BadNode { hash, message } => {
            WitnessError::BadNode { hash: *hash, message: message.clone() }
        }
        WitnessError::MissingCode { hash } => WitnessError::MissingCode { hash: *hash },
        WitnessError::MissingHeader { number } => WitnessError::MissingHeader { number: *number },
        other => WitnessError::Trie { what: "read".into(), message: other.to_string() },
    }
}
