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
use alloy_primitives::{B256, KECCAK256_EMPTY, U256, keccak256};
use revm::bytecode::Bytecode;
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

use super::ImportError;
use crate::chain::{
    ChainError, ChainSpec, GenesisHead, GenesisItem, HeaderPolicy, Network, stream_genesis,
};
use crate::storage::{Database, Writer};
use crate::trie::build_state_root;

/// Allocation items (accounts and slots) written per commit while initialising.
const GENESIS_BATCH: usize = 200_000;

/// Reads the chain spec stored at init, under the datadir's header policy; `None` for an
/// uninitialised datadir.
pub fn load_spec(db: &Database) -> Result<Option<ChainSpec>, ImportError> {
    let r = db.begin_read()?;
    let Some(json) = r.genesis_json()? else { return Ok(None) };
    let (genesis, reading) =
        crate::chain::read_genesis_json(&json).map_err(|e| e.at(Path::new("<stored genesis>")))?;
    let number = genesis.number.unwrap_or_default();
    // An anchored datadir holds no genesis header: its root was recorded at init.
    let state_root = match r.anchor_genesis_root()? {
        Some(root) if r.anchor().is_some() => root,
        _ => r.header(number)?.ok_or(ImportError::NotInitialised)?.state_root,
    };
    let spec = ChainSpec::from_genesis_read(genesis, reading, state_root)?;
    let policy = match r.header_policy()? {
        Some(name) => HeaderPolicy::from_name(&name).ok_or_else(|| {
            ImportError::Storage(crate::storage::StorageError::Corrupt {
                table: "meta",
                detail: format!("unknown header policy {name:?}"),
            })
        })?,
        None => HeaderPolicy::default_for(spec.chain_id()),
    };
    Ok(Some(spec.with_header_policy(policy)))
}

/// What `init` may be told besides the genesis.
#[derive(Debug, Clone, Copy, Default)]
pub struct InitOptions {
    /// The header policy to record (`None`: [`HeaderPolicy::default_for`] the chain id). On a
    /// datadir initialised before, a policy that differs from the recorded one is refused.
    pub policy: Option<HeaderPolicy>,
    /// Which trie history the datadir keeps (`None`: all of it). Fixed at init: on a datadir
    /// initialised before, another choice is refused.
    pub proof_history: Option<crate::storage::segments::ProofHistory>,
    /// Take a genesis whose chain id is a named network's but whose hash is not (the consensus
    /// test suites use chain id 1 for their own chains). Off: such a genesis is refused,
    /// naming both hashes, since a file claiming mainnet's chain id is most likely a broken
    /// copy of mainnet's genesis.
    pub foreign_chain_id: bool,
}

/// Where a genesis comes from.
#[derive(Debug, Clone, Copy)]
pub enum GenesisSource<'a> {
    /// A named network's built-in genesis.
    Network(Network),
    /// A genesis.json file (geth's or Besu's dialect), streamed (any size).
    File(&'a Path),
    /// genesis.json text.
    Json(&'a str),
}

/// Initialises `db` with the genesis in `genesis_json` (block 0 and its allocation).
///
/// On a datadir initialised before, this is a no-op when the genesis is the same and an error
/// naming both genesis hashes when it is not.
pub fn init_genesis(db: &Database, genesis_json: &str) -> Result<(ChainSpec, bool), ImportError> {
    init_with(db, GenesisSource::Json(genesis_json), InitOptions::default())
}

/// [`init_genesis`] reading the file at `path` as a stream (any size).
pub fn init_genesis_file(db: &Database, path: &Path) -> Result<(ChainSpec, bool), ImportError> {
    init_with(db, GenesisSource::File(path), InitOptions::default())
}

/// Initialises `db` from `source` with `options`; returns the spec (under the recorded header
/// policy) and whether anything was written. A named network's genesis must give its known
/// hash, and [`HeaderPolicy::Dev`] is refused for the named networks and their chain ids.
/// When a genesis file was written, how it was read is logged (its dialect, and one warning
/// naming the fields dropped).
pub fn init_with(
    db: &Database,
    source: GenesisSource<'_>,
    options: InitOptions,
) -> Result<(ChainSpec, bool), ImportError> {
    let result = init_source(db, source, options);
    if let Ok((spec, true)) = &result
        && matches!(source, GenesisSource::File(_))
    {
        spec.genesis_reading().log();
    }
    match (result, source) {
        (Err(ImportError::Chain(e)), GenesisSource::File(path)) => {
            Err(ImportError::Chain(e.at(path)))
        }
        (other, _) => other,
    }
}

fn init_source(
    db: &Database,
    source: GenesisSource<'_>,
    options: InitOptions,
) -> Result<(ChainSpec, bool), ImportError> {
    let network_json = match source {
        GenesisSource::Network(n) => {
            Some(n.genesis_json().map_err(|message| ChainError::Embedded { message })?)
        }
        _ => None,
    };
    let open: &Opener<'_> = &|| match source {
        GenesisSource::Network(_) => {
            Ok(Box::new(network_json.as_deref().unwrap_or_default().as_bytes()) as Box<dyn Read>)
        }
        GenesisSource::Json(json) => Ok(Box::new(json.as_bytes())),
        GenesisSource::File(path) => {
            let file = std::fs::File::open(path)
                .map_err(|error| ImportError::Open { path: path.display().to_string(), error })?;
            Ok(Box::new(file))
        }
    };
    let check = |spec: &ChainSpec| -> Result<HeaderPolicy, ImportError> {
        let chain_id = spec.chain_id();
        if let GenesisSource::Network(n) = source
            && spec.genesis_hash() != n.genesis_hash()
        {
            return Err(ChainError::Embedded {
                message: format!(
                    "the built-in {n} genesis gives hash {}, not the network's {}",
                    spec.genesis_hash(),
                    n.genesis_hash()
                ),
            }
            .into());
        }
        if let Some(n) = Network::from_chain_id(chain_id)
            && spec.network().is_none()
            && !options.foreign_chain_id
        {
            return Err(ImportError::NotTheNetwork {
                network: n.name(),
                chain_id,
                known: n.genesis_hash(),
                given: spec.genesis_hash(),
            });
        }
        let policy = options.policy.unwrap_or_else(|| HeaderPolicy::default_for(chain_id));
        if policy == HeaderPolicy::Dev
            && let Some(n) = spec.network().or_else(|| Network::from_chain_id(chain_id))
        {
            return Err(ImportError::DevPolicyRefused { network: n.name() });
        }
        Ok(policy)
    };
    init_from(db, open, &check, options)
}

type Opener<'a> = dyn Fn() -> Result<Box<dyn Read + 'a>, ImportError> + 'a;

fn parsed(head: Result<GenesisHead, ChainError>) -> Result<GenesisHead, ImportError> {
    Ok(head?)
}

/// Checks a built spec before anything is committed and gives the header policy to record.
type Check<'a> = dyn Fn(&ChainSpec) -> Result<HeaderPolicy, ImportError> + 'a;

fn init_from(
    db: &Database,
    open: &Opener<'_>,
    check: &Check<'_>,
    options: InitOptions,
) -> Result<(ChainSpec, bool), ImportError> {
    let asked = options.policy;
    if let Some(anchor) = db.begin_read()?.anchor() {
        return Err(ImportError::Anchored {
            anchor,
            what: "it cannot be initialised from a genesis",
        });
    }
    if let Some(stored) = load_spec(db)? {
        let head = parsed(stream_genesis(open()?, |_| Ok::<(), ImportError>(()))?)?;
        // Built with the stored root, so that only the configuration is compared (a genesis
        // that does not build is not the same one).
        let same_config = ChainSpec::from_genesis_read(
            head.genesis,
            head.reading,
            stored.genesis_header().state_root,
        )
        .is_ok_and(|s| s.genesis_hash() == stored.genesis_hash());
        if same_config && db.begin_read()?.alloc_digest()? == Some(head.alloc_digest) {
            if let Some(asked) = asked.filter(|p| *p != stored.header_policy()) {
                return Err(ImportError::PolicyMismatch { stored: stored.header_policy(), asked });
            }
            let kept = db.begin_read()?.proof_history()?;
            if let Some(asked) = options.proof_history.filter(|p| *p != kept) {
                return Err(ImportError::ProofHistoryMismatch { stored: kept, asked });
            }
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
            let (spec, _) =
                init_from(&other, open, &|_| Ok(HeaderPolicy::Strict), InitOptions::default())?;
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
    let spec = ChainSpec::from_genesis_read(head.genesis.clone(), head.reading.clone(), root)?;
    let policy = check(&spec)?;
    store_genesis_block(&mut writer, &spec, &head)?;
    writer.set_header_policy(policy.name())?;
    writer.set_proof_history(options.proof_history.unwrap_or_default())?;
    writer.commit(true)?;
    Ok((spec.with_header_policy(policy), true))
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
    writer.insert_block(&block, hash, &[], &[], None)?;
    // Genesis executes nothing; indexing it (empty) starts the trace-address index here.
    writer.index_trace_addresses(0, &[])?;
    let n = block.header.number;
    writer.advance_head_with_markers(n, n, n)?;
    Ok(())
}
