//! Initialising a datadir from a genesis, and reading its chain spec back.

use alloy_consensus::{Block, BlockBody, TxEnvelope};
use alloy_primitives::{KECCAK256_EMPTY, keccak256};
use revm::bytecode::Bytecode;
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

use super::ImportError;
use crate::chain::ChainSpec;
use crate::storage::Database;
use crate::trie::{RootMode, update_state_root};

/// Reads the chain spec stored at init; `None` for an uninitialised datadir.
pub fn load_spec(db: &Database) -> Result<Option<ChainSpec>, ImportError> {
    match db.begin_read()?.genesis_json()? {
        Some(json) => Ok(Some(ChainSpec::from_genesis_json(&json)?)),
        None => Ok(None),
    }
}

/// Initialises `db` with the genesis in `genesis_json` (block 0 and its allocation).
///
/// On a datadir initialised before, this is a no-op when the genesis hash matches and an
/// error naming both hashes when it does not.
pub fn init_genesis(db: &Database, genesis_json: &str) -> Result<(ChainSpec, bool), ImportError> {
    let spec = ChainSpec::from_genesis_json(genesis_json)?;
    if let Some(stored) = load_spec(db)? {
        if stored.genesis_hash() != spec.genesis_hash() {
            return Err(ImportError::GenesisMismatch {
                stored: stored.genesis_hash(),
                given: spec.genesis_hash(),
            });
        }
        return Ok((stored, false));
    }
    let mut changes = StateChangeset::default();
    for (address, account) in &spec.genesis().alloc {
        let code = account.code.clone().filter(|c| !c.is_empty());
        let code_hash = code.as_ref().map_or(KECCAK256_EMPTY, keccak256);
        if let Some(code) = code {
            changes.contracts.push((code_hash, Bytecode::new_raw(code)));
        }
        changes.accounts.push((
            *address,
            Some(AccountInfo {
                balance: account.balance,
                nonce: account.nonce.unwrap_or_default(),
                code_hash,
                ..Default::default()
            }),
        ));
        let storage: Vec<_> = account
            .storage
            .iter()
            .flatten()
            .filter(|(_, v)| !v.is_zero())
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        if !storage.is_empty() {
            changes.storage.push(PlainStorageChangeset {
                address: *address,
                wipe_storage: false,
                storage,
            });
        }
    }
    let header = spec.genesis_header().clone();
    let hash = spec.genesis_hash();
    let mut writer = db.begin_write()?;
    writer.set_genesis_json(genesis_json)?;
    writer.apply_changeset(header.number, &changes)?;
    let root = update_state_root(writer.transaction(), header.number, &changes, RootMode::Store)?;
    if root != header.state_root {
        return Err(ImportError::Mismatch {
            number: header.number,
            hash,
            what: "genesis state root (stored allocation)",
            expected: header.state_root.to_string(),
            got: root.to_string(),
        });
    }
    let block = Block::<TxEnvelope> { header, body: BlockBody::default() };
    writer.insert_block(&block, hash, &[], &[])?;
    writer.set_markers(block.header.number, block.header.number, block.header.number)?;
    writer.commit(true)?;
    Ok((spec, true))
}
