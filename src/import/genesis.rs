//! Initialising a datadir from a genesis, and reading its chain spec back.
//!
//! The allocation is streamed: accounts are written in batches as the file is read, then every
//! trie is built from the stored state, so a genesis of any size is initialised in bounded
//! memory. The datadir keeps the genesis without its allocation (which lives in the state
//! tables) and an order-independent digest of the allocation, to recognise the same genesis
//! again without rebuilding it.

use std::io::Read;
use std::path::Path;

use alloy_consensus::{Block, BlockBody, TxEnvelope};
use alloy_genesis::Genesis;
use alloy_primitives::{B256, KECCAK256_EMPTY, U256, keccak256};
use revm::bytecode::Bytecode;
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

use super::ImportError;
use crate::chain::{ChainError, ChainSpec, GenesisHead, GenesisItem, stream_genesis};
use crate::storage::{Database, Writer};
use crate::trie::build_state_root;

/// Allocation items (accounts and slots) written per commit while initialising.
const GENESIS_BATCH: usize = 200_000;

/// Reads the chain spec stored at init; `None` for an uninitialised datadir.
pub fn load_spec(db: &Database) -> Result<Option<ChainSpec>, ImportError> {
    let r = db.begin_read()?;
    let Some(json) = r.genesis_json()? else { return Ok(None) };
    let genesis: Genesis = serde_json::from_str(&json)
        .map_err(|error| ChainError::Parse { path: "<stored genesis>".into(), error })?;
    let number = genesis.number.unwrap_or_default();
    let header = r.header(number)?.ok_or(ImportError::NotInitialised)?;
    Ok(Some(ChainSpec::from_genesis_with_state_root(genesis, header.state_root)?))
}

/// Initialises `db` with the genesis in `genesis_json` (block 0 and its allocation).
///
/// On a datadir initialised before, this is a no-op when the genesis is the same and an error
/// naming both genesis hashes when it is not.
pub fn init_genesis(db: &Database, genesis_json: &str) -> Result<(ChainSpec, bool), ImportError> {
    init_from(db, &|| Ok(Box::new(genesis_json.as_bytes())))
}

/// [`init_genesis`] reading the file at `path` as a stream (any size).
pub fn init_genesis_file(db: &Database, path: &Path) -> Result<(ChainSpec, bool), ImportError> {
    init_from(db, &|| {
        let file = std::fs::File::open(path)
            .map_err(|error| ImportError::Open { path: path.display().to_string(), error })?;
        Ok(Box::new(file))
    })
}

type Opener<'a> = dyn Fn() -> Result<Box<dyn Read + 'a>, ImportError> + 'a;

fn parsed(head: Result<GenesisHead, ChainError>) -> Result<GenesisHead, ImportError> {
    Ok(head?)
}

fn init_from(db: &Database, open: &Opener<'_>) -> Result<(ChainSpec, bool), ImportError> {
    if let Some(stored) = load_spec(db)? {
        let head = parsed(stream_genesis(open()?, |_| Ok::<(), ImportError>(()))?)?;
        let same_config = ChainSpec::from_genesis_with_state_root(
            head.genesis,
            stored.genesis_header().state_root,
        )?
        .genesis_hash()
            == stored.genesis_hash();
        if same_config && db.begin_read()?.alloc_digest()? == Some(head.alloc_digest) {
            return Ok((stored, false));
        }
        // Another genesis: build it aside to name its hash.
        let dir = std::env::temp_dir().join(format!(
            "loupe-genesis-check-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let given = Database::open(&dir).map_err(ImportError::from).and_then(|other| {
            let (spec, _) = init_from(&other, open)?;
            Ok(spec.genesis_hash())
        });
        let _ = std::fs::remove_dir_all(&dir);
        return Err(ImportError::GenesisMismatch { stored: stored.genesis_hash(), given: given? });
    }

    let mut writer = Some(db.begin_write()?);
    if let Some(w) = &writer {
        w.clear_state()?;
    }
    let mut batch = StateChangeset::default();
    let mut pending = 0usize;
    let head = stream_genesis(open()?, |item| {
        add_item(&mut batch, item);
        pending += 1;
        if pending >= GENESIS_BATCH {
            if let Some(w) = writer.take() {
                w.apply_genesis(&std::mem::take(&mut batch))?;
                w.commit(false)?;
            }
            writer = Some(db.begin_write()?);
            pending = 0;
        }
        Ok::<(), ImportError>(())
    })?;
    let head = parsed(head)?;
    let mut writer = match writer {
        Some(w) => w,
        None => db.begin_write()?,
    };
    writer.apply_genesis(&batch)?;
    let root = build_state_root(writer.transaction())?;
    let spec = ChainSpec::from_genesis_with_state_root(head.genesis.clone(), root)?;
    store_genesis_block(&mut writer, &spec, &head)?;
    writer.commit(true)?;
    Ok((spec, true))
}

/// Adds one allocation item to `batch`.
fn add_item(batch: &mut StateChangeset, item: GenesisItem) {
    match item {
        GenesisItem::Account(address, account) => {
            let code = account.code.filter(|c| !c.is_empty());
            let code_hash = code.as_ref().map_or(KECCAK256_EMPTY, keccak256);
            if let Some(code) = code {
                batch.contracts.push((code_hash, Bytecode::new_raw(code)));
            }
            batch.accounts.push((
                address,
                Some(AccountInfo {
                    balance: account.balance,
                    nonce: account.nonce.unwrap_or_default(),
                    code_hash,
                    ..Default::default()
                }),
            ));
        }
        GenesisItem::Slot(_, _, value) if value.is_zero() => {}
        GenesisItem::Slot(address, slot, value) => {
            // Slots of one account arrive together: extend its entry while it is the last.
            let slot = (U256::from_be_bytes(slot.0), U256::from_be_bytes(value.0));
            match batch.storage.last_mut() {
                Some(last) if last.address == address => last.storage.push(slot),
                _ => batch.storage.push(PlainStorageChangeset {
                    address,
                    wipe_storage: false,
                    storage: vec![slot],
                }),
            }
        }
    }
}

fn store_genesis_block(
    writer: &mut Writer,
    spec: &ChainSpec,
    head: &GenesisHead,
) -> Result<(), ImportError> {
    let header = spec.genesis_header().clone();
    let hash: B256 = spec.genesis_hash();
    writer.set_genesis_json(&head.json)?;
    writer.set_alloc_digest(&head.alloc_digest)?;
    // With Shanghai at genesis the header commits to withdrawals, so the body has an (empty)
    // withdrawals list; it counts in the block's size.
    let withdrawals = header.withdrawals_root.map(|_| Default::default());
    let block =
        Block::<TxEnvelope> { header, body: BlockBody { withdrawals, ..Default::default() } };
    writer.insert_block(&block, hash, &[], &[])?;
    // Genesis executes nothing; indexing it (empty) starts the trace-address index here.
    writer.index_trace_addresses(0, &[])?;
    let n = block.header.number;
    writer.set_markers(n, n, n)?;
    Ok(())
}
