//! [`init_anchored`]: a datadir whose chain starts at an anchor block, holding only a partial
//! state there (a witness's), onto which blocks import with a state root verified elsewhere
//! ([`super::import_block_trusted_root`]).
//!
//! The anchor's header and a few ancestors' (for `BLOCKHASH` and the ommer rules) are stored as
//! headers alone, without bodies or receipts; the state is stored at the anchor without history
//! and without any trie. `meta` records the anchor ([`crate::storage::tables::meta::ANCHOR`]):
//! the state below it is refused (`StorageError::BelowAnchor`), and so is anything needing the
//! full trie (proofs, verification, state roots of simulations, a block import that computes
//! its root).

use std::path::Path;

use alloy_consensus::Header;
use alloy_primitives::{Address, B256, Bytes, KECCAK256_EMPTY, U256, keccak256};
use revm::bytecode::Bytecode;
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

use super::ImportError;
use crate::chain::ChainSpec;
use crate::storage::Database;

/// One account of an anchored datadir's state at its anchor block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AnchorAccount {
    /// The account's address.
    pub address: Address,
    /// Balance, nonce and code hash (its `code` field is ignored); `None`: the account does
    /// not exist at the anchor.
    pub info: Option<AccountInfo>,
    /// The account's code, if it has any and it is known; it must hash to `info.code_hash`.
    pub code: Option<Bytes>,
    /// Slots known at the anchor with their values (a value of 0: the slot is unset).
    pub storage: Vec<(U256, U256)>,
}

/// Creates an anchored datadir in `dir` (which must not hold an initialised datadir) for the
/// chain of `spec`: `headers` ascending and each the parent of the next, the last being the
/// anchor block (the parent of the first block to import), and `accounts` the state at the
/// anchor that the blocks to import read. The head, safe and finalized markers are the anchor.
///
/// Whatever `accounts` leaves out reads as absent: the datadir answers for the accounts and
/// slots it was given, which is what executing and tracing the next block needs.
pub fn init_anchored(
    dir: &Path,
    spec: &ChainSpec,
    headers: &[Header],
    accounts: &[AnchorAccount],
) -> Result<Database, ImportError> {
    let db = Database::open(dir)?;
    init_anchored_db(&db, spec, headers, accounts)?;
    Ok(db)
}

/// [`init_anchored`] on a database already open (with the history epochs it was created with).
pub fn init_anchored_db(
    db: &Database,
    spec: &ChainSpec,
    headers: &[Header],
    accounts: &[AnchorAccount],
) -> Result<(), ImportError> {
    let bad = |why: String| ImportError::AnchorInput(why);
    let anchor_header = headers.last().ok_or_else(|| bad("no anchor header given".into()))?;
    let anchor = anchor_header.number;
    if db.begin_read()?.head()?.is_some() {
        return Err(bad(format!("{} already holds an initialised datadir", db.path().display())));
    }
    let hashes: Vec<B256> = headers.iter().map(Header::hash_slow).collect();
    for (i, pair) in headers.windows(2).enumerate() {
        if pair[1].number != pair[0].number + 1 || pair[1].parent_hash != hashes[i] {
            return Err(bad(format!(
                "header {} (hash {}) is not the parent of header {} (its parent hash is {})",
                pair[0].number, hashes[i], pair[1].number, pair[1].parent_hash
            )));
        }
    }
    if headers[0].number == 0 && hashes[0] != spec.genesis_hash() {
        return Err(bad(format!(
            "header 0 has hash {}, not the chain's genesis hash {}",
            hashes[0],
            spec.genesis_hash()
        )));
    }
    let genesis_json = stored_genesis_json(spec)?;
    let changes = anchor_changeset(accounts)?;
    let writer = db.begin_write()?;
    writer.clear_state()?;
    writer.apply_anchor_state(anchor, &changes)?;
    for (header, hash) in headers.iter().zip(&hashes) {
        writer.insert_header(header, *hash)?;
    }
    writer.set_genesis_json(&genesis_json)?;
    writer.set_anchor(anchor, spec.genesis_header().state_root)?;
    writer.set_header_policy(spec.header_policy().name())?;
    writer.set_proof_history(Default::default())?;
    // The trace-address index starts at the anchor (which executed nothing here).
    writer.index_trace_addresses(anchor, &[])?;
    writer.set_anchor_markers(anchor)?;
    writer.commit(true)?;
    Ok(())
}

/// The genesis text an anchored datadir keeps (without its allocation, as `init` keeps it),
/// checked to give back the same genesis hash when read again.
fn stored_genesis_json(spec: &ChainSpec) -> Result<String, ImportError> {
    let mut genesis = spec.genesis().clone();
    genesis.alloc.clear();
    let json = serde_json::to_string(&genesis)
        .map_err(|e| ImportError::AnchorInput(format!("writing the genesis: {e}")))?;
    let (read, reading) = crate::chain::read_genesis_json(&json)?;
    let again = ChainSpec::from_genesis_read(read, reading, spec.genesis_header().state_root)?;
    if again.genesis_hash() != spec.genesis_hash() {
        return Err(ImportError::AnchorInput(format!(
            "the chain's genesis reads back with hash {}, not {}",
            again.genesis_hash(),
            spec.genesis_hash()
        )));
    }
    Ok(json)
}

/// The accounts as a changeset: codes checked against their hashes, unset slots left out.
fn anchor_changeset(accounts: &[AnchorAccount]) -> Result<StateChangeset, ImportError> {
    let mut changes = StateChangeset::default();
    let mut seen = std::collections::HashSet::new();
    for a in accounts {
        if !seen.insert(a.address) {
            return Err(ImportError::AnchorInput(format!("account {} given twice", a.address)));
        }
        let Some(info) = &a.info else {
            if !a.storage.iter().all(|(_, v)| v.is_zero()) {
                return Err(ImportError::AnchorInput(format!(
                    "account {} is absent but has storage set",
                    a.address
                )));
            }
            continue;
        };
        if let Some(code) = a.code.as_ref().filter(|c| !c.is_empty()) {
            let hash = keccak256(code);
            if hash != info.code_hash {
                return Err(ImportError::AnchorInput(format!(
                    "the code given for account {} hashes to {hash}, not its code hash {}",
                    a.address, info.code_hash
                )));
            }
            changes.contracts.push((hash, Bytecode::new_raw(code.clone())));
        }
        let code_hash = if info.code_hash.is_zero() { KECCAK256_EMPTY } else { info.code_hash };
        changes.accounts.push((
            a.address,
            Some(AccountInfo {
                balance: info.balance,
                nonce: info.nonce,
                code_hash,
                ..Default::default()
            }),
        ));
        let storage: Vec<(U256, U256)> =
            a.storage.iter().filter(|(_, v)| !v.is_zero()).copied().collect();
        if !storage.is_empty() {
            changes.storage.push(PlainStorageChangeset {
                address: a.address,
                wipe_storage: false,
                storage,
            });
        }
    }
    Ok(changes)
}
