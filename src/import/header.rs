//! The consensus rules of a block that execution does not enforce by itself, checked before it
//! runs: its header against its parent by the rules of its fork (the yellow paper's header
//! validity, EIP-2/100 difficulty, EIP-1559, EIP-3675, EIP-4844, EIP-4895, EIP-7685, EIP-7843,
//! EIP-7928, EIP-7934, the DAO fork's extra data) and its body's shape (ommers, blob sidecars,
//! withdrawals). The block access list itself is checked after execution (`import::block`).
//!
//! Written here: alloy has no header validator outside reth's consensus crates, which are not
//! on crates.io. Proof of work is not verified (as in reth, and geth's test runner): a pre-merge
//! chain is trusted for its seals, and era1's accumulator roots anchor the history.

use std::collections::{HashMap, HashSet};

use alloy_consensus::{Block, EMPTY_OMMER_ROOT_HASH, Header, TxEnvelope};
use alloy_eips::eip1559::{BaseFeeParams, INITIAL_BASE_FEE};
use alloy_eips::eip4844::DATA_GAS_PER_BLOB;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{B256, Bytes};

use super::{ImportError, Rule};
use crate::chain::{ChainSpec, DifficultyParent, HeaderPolicy, difficulty};

/// The largest gas limit (EIP-1985).
pub const MAX_GAS_LIMIT: u64 = 0x7fff_ffff_ffff_ffff;
/// The smallest gas limit.
const MIN_GAS_LIMIT: u64 = 5000;
/// The gas limit moves by less than the parent's over this per block.
const GAS_LIMIT_BOUND_DIVISOR: u64 = 1024;
/// Longest extra data.
const MAX_EXTRA_DATA: usize = 32;
/// The extra data of the DAO fork block and the nine after it, on the side that took it.
pub const DAO_EXTRA_DATA: &[u8] = b"dao-hard-fork";
/// Blocks from the DAO fork block on that must carry [`DAO_EXTRA_DATA`].
const DAO_EXTRA_RANGE: u64 = 10;
/// How far ahead of the clock a proof-of-work block's timestamp may be (geth, reth).
const ALLOWED_FUTURE_SECS: u64 = 15;
/// Most ommers in a block.
const MAX_OMMERS: usize = 2;
/// Ancestors an ommer's parent may be among (so an ommer is 1 to 6 blocks older).
const OMMER_GENERATIONS: u64 = 7;
/// EIP-7934: largest RLP-encoded block from Osaka on (10 MiB less a 2 MiB margin).
pub const MAX_RLP_BLOCK_SIZE: usize = 8_388_608;

/// A broken rule and its values, before the block's number and hash are attached.
type Broken = (Rule, String);

fn broken<T>(rule: Rule, detail: String) -> Result<T, Broken> {
    Err((rule, detail))
}

/// What a header check needs of the chain before the block: its ancestors' headers and hashes,
/// and their ommers.
pub(super) trait Ancestry {
    /// The canonical header and hash at `number`.
    fn ancestor(&self, number: u64) -> Result<Option<(Header, B256)>, ImportError>;
    /// The ommers of the canonical block at `number`.
    fn ommers_of(&self, number: u64) -> Result<Vec<Header>, ImportError>;
}

impl Ancestry for crate::storage::Reader {
    fn ancestor(&self, number: u64) -> Result<Option<(Header, B256)>, ImportError> {
        Ok(self.header_and_hash(number)?.map(|e| (e.0.clone(), e.1)))
    }

    fn ommers_of(&self, number: u64) -> Result<Vec<Header>, ImportError> {
        Ok(self.body(number)?.map(|(b, _)| b.ommers).unwrap_or_default())
    }
}

impl Ancestry for crate::storage::Writer {
    fn ancestor(&self, number: u64) -> Result<Option<(Header, B256)>, ImportError> {
        let (Some(h), Some(hash)) = (self.header(number)?, self.canonical_hash(number)?) else {
            return Ok(None);
        };
        Ok(Some((h, hash)))
    }

    fn ommers_of(&self, number: u64) -> Result<Vec<Header>, ImportError> {
        Ok(self.ommers(number)?)
    }
}

/// Checks `block` (hash `hash`) against its parent and ancestors: every header rule of its
/// fork, then its body's shape. The error names the rule, the block and the values.
pub(super) fn check_block(
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    hash: B256,
    parent: &Header,
    ancestry: &impl Ancestry,
) -> Result<(), ImportError> {
    let header = &block.header;
    let invalid = |(rule, detail): Broken| ImportError::InvalidHeader {
        number: header.number,
        hash,
        rule,
        detail,
    };
    check_header(spec, header, parent, false, now()).map_err(invalid)?;
    check_body(spec, block).map_err(invalid)?;
    if !block.body.ommers.is_empty() {
        check_ommers(spec, block, hash, ancestry)?.map_err(invalid)?;
    }
    Ok(())
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The rules of one header against its parent. `ommer`: the header is an ommer being checked
/// (no clock check; geth's rule). `now`: the clock, in seconds since 1970.
pub(super) fn check_header(
    spec: &ChainSpec,
    header: &Header,
    parent: &Header,
    ommer: bool,
    now: u64,
) -> Result<(), Broken> {
    let number = header.number;
    let time = header.timestamp;
    let policy = spec.header_policy();
    if number != parent.number + 1 {
        return broken(
            Rule::Number,
            format!("number {number} does not follow its parent's {}", parent.number),
        );
    }
    if header.extra_data.len() > MAX_EXTRA_DATA {
        return broken(
            Rule::ExtraData,
            format!("extra data is {} bytes, more than {MAX_EXTRA_DATA}", header.extra_data.len()),
        );
    }
    check_dao_extra_data(spec, number, &header.extra_data)?;
    let later = match policy {
        HeaderPolicy::Strict => time > parent.timestamp,
        HeaderPolicy::Dev => time >= parent.timestamp,
    };
    if !later {
        let relation = if time == parent.timestamp { "equal to" } else { "before" };
        return broken(
            Rule::Timestamp,
            format!("timestamp {time} is {relation} the parent's {}", parent.timestamp),
        );
    }
    let merged = spec.is_paris_active_at_block(number);
    if !merged && !ommer && time > now.saturating_add(ALLOWED_FUTURE_SECS) {
        return broken(
            Rule::FutureTimestamp,
            format!(
                "timestamp {time} is more than {ALLOWED_FUTURE_SECS} s after the clock's {now}"
            ),
        );
    }
    check_gas(spec, header, parent)?;
    check_base_fee(spec, header, parent)?;
    if merged {
        check_proof_of_stake(header)?;
    } else {
        if parent.difficulty.is_zero() && parent.number > 0 {
            return broken(
                Rule::Difficulty,
                "a proof-of-work block after a proof-of-stake parent".to_string(),
            );
        }
        let expected = difficulty(
            spec,
            time,
            &DifficultyParent {
                number: parent.number,
                timestamp: parent.timestamp,
                difficulty: parent.difficulty,
                has_ommers: parent.ommers_hash != EMPTY_OMMER_ROOT_HASH,
            },
        );
        if header.difficulty != expected {
            return broken(
                Rule::Difficulty,
                format!(
                    "difficulty {} is not the {expected} the parent's gives",
                    header.difficulty
                ),
            );
        }
    }
    check_fork_fields(spec, header, parent)
}

/// Extra data, gas limit and gas used.
fn check_gas(spec: &ChainSpec, header: &Header, parent: &Header) -> Result<(), Broken> {
    if header.gas_limit > MAX_GAS_LIMIT {
        return broken(
            Rule::GasLimit,
            format!("gas limit {} is above the maximum {MAX_GAS_LIMIT}", header.gas_limit),
        );
    }
    if header.gas_used > header.gas_limit {
        return broken(
            Rule::GasUsed,
            format!("gas used {} is above the gas limit {}", header.gas_used, header.gas_limit),
        );
    }
    // EIP-1559: at the London block the parent's limit counts double (the elasticity).
    let number = header.number;
    let parent_limit = if spec.is_london_active_at_block(number)
        && !spec.is_london_active_at_block(parent.number)
    {
        parent.gas_limit.saturating_mul(BaseFeeParams::ethereum().elasticity_multiplier as u64)
    } else {
        parent.gas_limit
    };
    let step = parent_limit / GAS_LIMIT_BOUND_DIVISOR;
    if header.gas_limit.abs_diff(parent_limit) >= step.max(1) || header.gas_limit < MIN_GAS_LIMIT {
        return broken(
            Rule::GasLimit,
            format!(
                "gas limit {} is not within {} of the parent's {parent_limit} (or below {MIN_GAS_LIMIT})",
                header.gas_limit,
                step.saturating_sub(1)
            ),
        );
    }
    Ok(())
}

/// The base fee: absent before London; from London on present, 1 gwei at the London block and
/// by EIP-1559's formula after it (its value unchecked under [`HeaderPolicy::Dev`]).
fn check_base_fee(spec: &ChainSpec, header: &Header, parent: &Header) -> Result<(), Broken> {
    let number = header.number;
    if !spec.is_london_active_at_block(number) {
        return match header.base_fee_per_gas {
            None => Ok(()),
            Some(fee) => broken(Rule::BaseFee, format!("base fee {fee} before London")),
        };
    }
    let Some(fee) = header.base_fee_per_gas else {
        return broken(Rule::BaseFee, "no base fee from London on".to_string());
    };
    if spec.header_policy() == HeaderPolicy::Dev {
        return Ok(());
    }
    let expected = if spec.is_london_active_at_block(parent.number) {
        match parent.next_block_base_fee(BaseFeeParams::ethereum()) {
            Some(f) => f,
            None => return broken(Rule::BaseFee, "the parent has no base fee".to_string()),
        }
    } else {
        INITIAL_BASE_FEE
    };
    if fee != expected {
        return broken(
            Rule::BaseFee,
            format!(
                "base fee {fee} is not the {expected} the parent's gives (its base fee {:?}, gas \
                 used {} of {})",
                parent.base_fee_per_gas, parent.gas_used, parent.gas_limit
            ),
        );
    }
    Ok(())
}

/// EIP-3675: after the merge no difficulty, no nonce, no ommers.
fn check_proof_of_stake(header: &Header) -> Result<(), Broken> {
    if !header.difficulty.is_zero() {
        return broken(
            Rule::Difficulty,
            format!("difficulty {} after the merge", header.difficulty),
        );
    }
    if !header.nonce.is_zero() {
        return broken(Rule::ProofOfStake, format!("nonce {} after the merge", header.nonce));
    }
    if header.ommers_hash != EMPTY_OMMER_ROOT_HASH {
        return broken(
            Rule::ProofOfStake,
            format!("ommers hash {} after the merge (no ommers allowed)", header.ommers_hash),
        );
    }
    Ok(())
}

/// The DAO fork's extra data (EIP-779; geth's `VerifyDAOHeaderExtraData`): the fork block and
/// the nine after it carry `dao-hard-fork` on a chain that took the fork, and never on one that
/// declared the block without taking it.
fn check_dao_extra_data(spec: &ChainSpec, number: u64, extra: &Bytes) -> Result<(), Broken> {
    let Some((block, support)) = spec.dao_fork() else { return Ok(()) };
    if number < block || number >= block + DAO_EXTRA_RANGE {
        return Ok(());
    }
    let marked = extra.as_ref() == DAO_EXTRA_DATA;
    if support && !marked {
        return broken(
            Rule::DaoExtraData,
            format!(
                "extra data {extra} is not \"dao-hard-fork\" ({DAO_EXTRA_RANGE} blocks from {block} on)"
            ),
        );
    }
    if !support && marked {
        return broken(
            Rule::DaoExtraData,
            format!(
                "extra data \"dao-hard-fork\" on a chain that did not take the DAO fork at {block}"
            ),
        );
    }
    Ok(())
}

/// The fields each fork requires and forbids: withdrawals root (Shanghai), blob gas, excess
/// blob gas and beacon root (Cancun), requests hash (Prague), block access list hash and slot
/// number (Amsterdam).
fn check_fork_fields(spec: &ChainSpec, header: &Header, parent: &Header) -> Result<(), Broken> {
    let time = header.timestamp;
    let presence = |rule: Rule, what: &str, present: bool, required: bool, fork: &str| match (
        present, required,
    ) {
        (true, false) => broken(rule, format!("{what} before {fork}")),
        (false, true) => broken(rule, format!("no {what} from {fork} on")),
        _ => Ok(()),
    };
    let shanghai = spec.is_shanghai_active_at_timestamp(time);
    presence(
        Rule::Withdrawals,
        "withdrawals root",
        header.withdrawals_root.is_some(),
        shanghai,
        "Shanghai",
    )?;
    let cancun = spec.is_cancun_active_at_timestamp(time);
    presence(Rule::BlobGas, "blob gas used", header.blob_gas_used.is_some(), cancun, "Cancun")?;
    presence(Rule::BlobGas, "excess blob gas", header.excess_blob_gas.is_some(), cancun, "Cancun")?;
    presence(
        Rule::BlobGas,
        "parent beacon block root",
        header.parent_beacon_block_root.is_some(),
        cancun,
        "Cancun",
    )?;
    let prague = spec.is_prague_active_at_timestamp(time);
    presence(Rule::Requests, "requests hash", header.requests_hash.is_some(), prague, "Prague")?;
    let amsterdam = spec.is_amsterdam_active_at_timestamp(time);
    presence(
        Rule::BlockAccessList,
        "block access list hash",
        header.block_access_list_hash.is_some(),
        amsterdam,
        "Amsterdam",
    )?;
    presence(
        Rule::SlotNumber,
        "slot number",
        header.slot_number.is_some(),
        amsterdam,
        "Amsterdam",
    )?;
    if let (Some(params), Some(used), Some(excess)) =
        (spec.blob_params_at(time), header.blob_gas_used, header.excess_blob_gas)
    {
        let max = params.max_blob_gas_per_block();
        if used > max {
            return broken(
                Rule::BlobGas,
                format!("blob gas used {used} is above the block's maximum {max}"),
            );
        }
        if !used.is_multiple_of(DATA_GAS_PER_BLOB) {
            return broken(
                Rule::BlobGas,
                format!("blob gas used {used} is not a multiple of {DATA_GAS_PER_BLOB} (one blob)"),
            );
        }
        // The parent of the Cancun block has no blob fields: they count as zero.
        let expected = parent.next_block_excess_blob_gas(params).unwrap_or(0);
        if excess != expected {
            return broken(
                Rule::BlobGas,
                format!(
                    "excess blob gas {excess} is not the {expected} the parent's blob gas gives"
                ),
            );
        }
    }
    Ok(())
}

/// The body's shape: withdrawals exactly from Shanghai on, no blob sidecars, and the size cap.
fn check_body(spec: &ChainSpec, block: &Block<TxEnvelope>) -> Result<(), Broken> {
    let header = &block.header;
    let shanghai = spec.is_shanghai_active_at_timestamp(header.timestamp);
    match (&block.body.withdrawals, shanghai) {
        (Some(w), false) => {
            return broken(
                Rule::Withdrawals,
                format!("a withdrawals list ({} items) before Shanghai", w.len()),
            );
        }
        (None, true) => {
            return broken(Rule::Withdrawals, "no withdrawals list from Shanghai on".into());
        }
        _ => {}
    }
    if block.body.ommers.len() > MAX_OMMERS {
        return broken(
            Rule::Ommers,
            format!("{} ommers, more than {MAX_OMMERS}", block.body.ommers.len()),
        );
    }
    if let Some(index) = block.body.transactions.iter().position(has_sidecar)
        && spec.header_policy() == HeaderPolicy::Strict
    {
        return broken(
            Rule::BlobSidecar,
            format!(
                "transaction {index} is a blob transaction in its network form (with its blobs): \
                 a block holds only the consensus form"
            ),
        );
    }
    if spec.is_osaka_active_at_timestamp(header.timestamp) {
        let size = alloy_rlp::Encodable::length(block);
        if size > MAX_RLP_BLOCK_SIZE {
            return broken(
                Rule::BlockSize,
                format!("the RLP block is {size} bytes, more than {MAX_RLP_BLOCK_SIZE} (EIP-7934)"),
            );
        }
    }
    Ok(())
}

/// Whether `tx` is a blob transaction carrying its sidecar (the network form).
pub fn has_sidecar(tx: &TxEnvelope) -> bool {
    matches!(tx, TxEnvelope::Eip4844(s) if has_sidecar_variant(s.tx()))
}

/// `block` in its consensus form: every blob transaction without its sidecar (the signature
/// and hash are those of the consensus form already). Returns how many sidecars were removed.
pub fn without_sidecars(block: Block<TxEnvelope>) -> (Block<TxEnvelope>, usize) {
    let mut stripped = 0;
    let block = block.map_transactions(|tx| match tx {
        TxEnvelope::Eip4844(signed) if has_sidecar_variant(signed.tx()) => {
            stripped += 1;
            let (variant, signature, hash) = signed.into_parts();
            let tx = match variant {
                alloy_consensus::TxEip4844Variant::TxEip4844WithSidecar(w) => w.tx,
                alloy_consensus::TxEip4844Variant::TxEip4844(tx) => tx,
            };
            TxEnvelope::Eip4844(alloy_consensus::Signed::new_unchecked(
                alloy_consensus::TxEip4844Variant::TxEip4844(tx),
                signature,
                hash,
            ))
        }
        other => other,
    });
    (block, stripped)
}

fn has_sidecar_variant<T>(tx: &alloy_consensus::TxEip4844Variant<T>) -> bool {
    matches!(tx, alloy_consensus::TxEip4844Variant::TxEip4844WithSidecar(_))
}

/// The ommer rules (geth's `VerifyUncles`): each ommer is not the block, not an ancestor and
/// not already included (by this block or by one of the 7 ancestors); its parent is one of the
/// 7 ancestors but not the block's own parent; and it is a valid header against that parent.
/// The outer error is the store's; the inner one the rule broken. Where the store holds fewer
/// ancestors (an anchored datadir, which holds the headers a witness gave), an ommer whose
/// parent is not among them cannot be checked against it and is let through: the block's
/// state root, verified over its witness, covers the ommer's reward.
fn check_ommers(
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    hash: B256,
    ancestry: &impl Ancestry,
) -> Result<Result<(), Broken>, ImportError> {
    let number = block.header.number;
    let mut ancestors: HashMap<B256, Header> = HashMap::new();
    let mut included: HashSet<B256> = HashSet::new();
    let mut complete = true;
    for n in (number.saturating_sub(OMMER_GENERATIONS)..number).rev() {
        let Some((h, ancestor_hash)) = ancestry.ancestor(n)? else {
            complete = false;
            break;
        };
        if h.ommers_hash != EMPTY_OMMER_ROOT_HASH {
            included.extend(ancestry.ommers_of(n)?.iter().map(Header::hash_slow));
        }
        ancestors.insert(ancestor_hash, h);
    }
    ancestors.insert(hash, block.header.clone());
    included.insert(hash);
    for (i, ommer) in block.body.ommers.iter().enumerate() {
        let ommer_hash = ommer.hash_slow();
        let at =
            |detail: String| Ok(Err((Rule::Ommers, format!("ommer {i} ({ommer_hash}): {detail}"))));
        if !included.insert(ommer_hash) {
            return at("included before (by this block or one of its 7 ancestors)".into());
        }
        if ancestors.contains_key(&ommer_hash) {
            return at("is an ancestor of the block".into());
        }
        let parent = match ancestors.get(&ommer.parent_hash) {
            Some(p) if ommer.parent_hash != block.header.parent_hash => p,
            None if !complete && ommer.parent_hash != block.header.parent_hash => continue,
            _ => {
                return at(format!(
                    "its parent {} is not one of the block's 2nd to 7th ancestors",
                    ommer.parent_hash
                ));
            }
        };
        if let Err((rule, detail)) = check_header(spec, ommer, parent, true, now()) {
            return at(format!("invalid header: {rule} rule: {detail}"));
        }
    }
    Ok(Ok(()))
}
