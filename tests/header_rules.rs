//! Every consensus rule checked before a block runs (`import::header`), one at a time: a block
//! that breaks only that rule is refused with the rule named, and the block as it really is
//! still imports. Proof-of-work rules on real mainnet headers (the era1 fixture, blocks 1–40,
//! which hold ommers); proof-of-stake rules on the dev chain's last blocks (Osaka, blobs,
//! requests, withdrawals).

#![allow(clippy::unwrap_used)]

use crate::support;

#[path = "support/era1.rs"]
mod era1;

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::{B64, B256, Bytes, U256};
use loupe::chain::{ChainSpec, HeaderPolicy, Network};
use loupe::import::{
    GenesisSource, ImportError, InitOptions, Rule, import_block_on_writer, init_with,
};
use loupe::storage::Database;

/// A change made to a valid block.
type Mutation = Box<dyn Fn(&mut Block<TxEnvelope>)>;

/// Tries `block` on top of the stored head, in a transaction that is dropped: the rule broken,
/// if any.
fn try_import(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
) -> Result<(), ImportError> {
    let w = db.begin_write().unwrap();
    import_block_on_writer(&w, spec, block).map(|_| ())
}

/// Tries `block` in place of the stored head (unwound in a transaction that is dropped).
fn try_replace(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
) -> Result<(), ImportError> {
    let mut w = db.begin_write().unwrap();
    w.unwind_head().unwrap();
    import_block_on_writer(&w, spec, block).map(|_| ())
}

/// Checks that `result` is a refusal for `rule` whose message contains `needle`.
fn refused(result: Result<(), ImportError>, rule: Rule, needle: &str, case: &str) {
    let err = result.expect_err(case);
    let text = err.to_string();
    match err.root() {
        ImportError::InvalidHeader { rule: got, .. } => {
            assert_eq!(*got, rule, "{case}: {text}");
            assert!(text.contains(needle), "{case}: {text} does not say {needle:?}");
            assert!(text.contains(&format!("{} rule", rule.name())), "{case}: {text}");
        }
        other => panic!("{case}: not a header refusal: {other}"),
    }
}

/// Applies each mutation to `base` and checks the refusal it gets from `attempt`.
fn check_cases(
    base: &Block<TxEnvelope>,
    cases: Vec<(Rule, &str, Mutation)>,
    attempt: impl Fn(&Block<TxEnvelope>) -> Result<(), ImportError>,
) {
    assert!(attempt(base).is_ok(), "the real block imports: {:?}", attempt(base).err());
    for (rule, needle, mutate) in cases {
        let mut b = base.clone();
        mutate(&mut b);
        refused(attempt(&b), rule, needle, &format!("{rule}/{needle}"));
    }
}

/// The era1 fixture's blocks 1..=last imported into a `--chain mainnet` datadir, and the blocks
/// from 0 to 60 (the ones after `last` not imported).
fn mainnet_prefix(
    dir: &std::path::Path,
    last: u64,
) -> Option<(Database, ChainSpec, Vec<Block<TxEnvelope>>)> {
    let bytes = era1::fixture_bytes()?;
    let blocks = era1::blocks(&bytes, 0, 60);
    let db = Database::open(dir).unwrap();
    let (spec, _) =
        init_with(&db, GenesisSource::Network(Network::Mainnet), InitOptions::default()).unwrap();
    assert_eq!(
        spec.genesis_hash(),
        blocks[0].header.hash_slow(),
        "the fixture's genesis is mainnet's"
    );
    for b in &blocks[1..=last as usize] {
        loupe::import::import_block(&db, &spec, b, false).unwrap();
    }
    Some((db, spec, blocks))
}

/// Proof-of-work rules on mainnet's own blocks: difficulty by the Frontier formula, the clock,
/// the fields later forks add, and each ommer rule.
#[test]
fn proof_of_work_rules_on_mainnet_headers() {
    let dir = tempfile::tempdir().unwrap();
    // Block 7 has an ommer; block 21 too. Import up to 20 and try 21.
    let Some((db, spec, blocks)) = mainnet_prefix(dir.path(), 20) else { return };
    let block = blocks[21].clone();
    assert_eq!(block.body.ommers.len(), 1, "block 21 has one ommer");
    let parent = blocks[20].header.clone();
    let ancestor = blocks[18].header.clone();
    let ommer = block.body.ommers[0].clone();
    // An ommer already included by an ancestor: block 7's, 14 blocks back, is too old; use one
    // within reach if there is one, else the rule is covered by the duplicate case.
    let earlier_ommer = blocks[15..21].iter().find_map(|b| b.body.ommers.first().cloned());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let p = parent;
    let mut cases: Vec<(Rule, &str, Mutation)> = vec![
        (Rule::Difficulty, "difficulty", Box::new(|b| b.header.difficulty += U256::from(1))),
        (
            Rule::Timestamp,
            "equal to the parent's",
            Box::new(move |b| b.header.timestamp = p.timestamp),
        ),
        (
            Rule::FutureTimestamp,
            "after the clock",
            Box::new(move |b| b.header.timestamp = now + 3600),
        ),
        (Rule::ExtraData, "33 bytes", Box::new(|b| b.header.extra_data = vec![0; 33].into())),
        (
            Rule::GasLimit,
            "not within",
            Box::new(|b| b.header.gas_limit += b.header.gas_limit / 1024),
        ),
        (Rule::GasLimit, "above the maximum", Box::new(|b| b.header.gas_limit = 1 << 63)),
        (
            Rule::GasUsed,
            "above the gas limit",
            Box::new(|b| b.header.gas_used = b.header.gas_limit + 1),
        ),
        (Rule::BaseFee, "before London", Box::new(|b| b.header.base_fee_per_gas = Some(7))),
        (
            Rule::Withdrawals,
            "before Shanghai",
            Box::new(|b| b.header.withdrawals_root = Some(B256::ZERO)),
        ),
        (
            Rule::Withdrawals,
            "before Shanghai",
            Box::new(|b| b.body.withdrawals = Some(Default::default())),
        ),
        (Rule::BlobGas, "before Cancun", Box::new(|b| b.header.blob_gas_used = Some(0))),
        (
            Rule::BlobGas,
            "before Cancun",
            Box::new(|b| b.header.parent_beacon_block_root = Some(B256::ZERO)),
        ),
        (Rule::Requests, "before Prague", Box::new(|b| b.header.requests_hash = Some(B256::ZERO))),
        (Rule::Ommers, "more than 2", {
            let o = ommer.clone();
            Box::new(move |b| b.body.ommers = vec![o.clone(), o.clone(), o.clone()])
        }),
        (Rule::Ommers, "included before", {
            let o = ommer.clone();
            Box::new(move |b| b.body.ommers = vec![o.clone(), o.clone()])
        }),
        (Rule::Ommers, "is an ancestor", Box::new(move |b| b.body.ommers = vec![ancestor.clone()])),
        (Rule::Ommers, "2nd to 7th ancestors", {
            // A sibling: the block's own parent as its parent.
            let mut sibling = ommer.clone();
            sibling.parent_hash = block.header.parent_hash;
            sibling.number = block.header.number;
            Box::new(move |b| b.body.ommers = vec![sibling.clone()])
        }),
        (Rule::Ommers, "invalid header: difficulty", {
            let mut bad = ommer;
            bad.difficulty += U256::from(1);
            Box::new(move |b| b.body.ommers = vec![bad.clone()])
        }),
    ];
    if let Some(o) = earlier_ommer {
        cases.push((
            Rule::Ommers,
            "included before",
            Box::new(move |b| b.body.ommers = vec![o.clone()]),
        ));
    }
    check_cases(&block, cases, |b| try_import(&db, &spec, b));

    // The DAO fork's extra data, on the same real blocks under a chain that declares the fork at
    // block 21 (chain id 7, so the genesis is not taken for mainnet's): with support the block
    // must carry "dao-hard-fork", without it must not.
    for support in [true, false] {
        let mut genesis: serde_json::Value =
            serde_json::from_str(&Network::Mainnet.genesis_json().unwrap()).unwrap();
        genesis["config"] = serde_json::json!({
            "chainId": 7, "homesteadBlock": 1_150_000, "daoForkBlock": 21, "daoForkSupport": support
        });
        let dao_spec = ChainSpec::from_genesis_json(&genesis.to_string()).unwrap();
        assert_eq!(dao_spec.network(), None);
        let mut marked = block.clone();
        marked.header.extra_data = Bytes::from_static(loupe::import::DAO_EXTRA_DATA);
        let (bad, needle) = if support { (&block, "is not") } else { (&marked, "did not take") };
        refused(try_import(&db, &dao_spec, bad), Rule::DaoExtraData, needle, "DAO");
    }
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(20), "nothing refused was stored");
}

/// Proof-of-stake rules on the dev chain's last block (Osaka: blobs, requests, withdrawals),
/// and the two rules the dev header policy relaxes.
#[test]
fn proof_of_stake_rules_on_the_dev_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, tip) = support::dev_chain(dir.path());
    let reader = db.begin_read().unwrap();
    let header = reader.header(tip).unwrap().unwrap();
    let parent = reader.header(tip - 1).unwrap().unwrap();
    let (body, _) = reader.body(tip).unwrap().unwrap();
    let txs: Vec<_> = reader.transactions(tip).unwrap().into_iter().map(|t| t.tx).collect();
    let block = Block {
        header: header.clone(),
        body: alloy_consensus::BlockBody { transactions: txs, ..body },
    };
    // Block 9's blob transaction, and the same with a sidecar (the network form).
    let blob_tx =
        reader.transactions(9).unwrap().into_iter().map(|t| t.tx).find(|t| t.is_eip4844()).unwrap();
    let TxEnvelope::Eip4844(signed) = blob_tx else { panic!("a blob transaction") };
    let (variant, signature, hash) = signed.into_parts();
    let with_sidecar = TxEnvelope::Eip4844(alloy_consensus::Signed::new_unchecked(
        alloy_consensus::TxEip4844Variant::TxEip4844WithSidecar(
            alloy_consensus::TxEip4844WithSidecar::from_tx_and_sidecar(
                match variant {
                    alloy_consensus::TxEip4844Variant::TxEip4844(tx) => tx,
                    alloy_consensus::TxEip4844Variant::TxEip4844WithSidecar(w) => w.tx,
                },
                alloy_eips::eip7594::BlobTransactionSidecarVariant::Eip4844(Default::default()),
            ),
        ),
        signature,
        hash,
    ));
    let p = parent.clone();
    let cases: Vec<(Rule, &str, Mutation)> = vec![
        (Rule::ProofOfStake, "nonce", Box::new(|b| b.header.nonce = B64::from(1u64))),
        (Rule::Difficulty, "after the merge", Box::new(|b| b.header.difficulty = U256::from(1))),
        (Rule::ProofOfStake, "ommers hash", Box::new(|b| b.header.ommers_hash = B256::ZERO)),
        (Rule::ExtraData, "33 bytes", Box::new(|b| b.header.extra_data = vec![0; 33].into())),
        (
            Rule::Timestamp,
            "before the parent's",
            Box::new(move |b| b.header.timestamp = p.timestamp - 1),
        ),
        (
            Rule::Timestamp,
            "equal to the parent's",
            Box::new(move |b| b.header.timestamp = parent.timestamp),
        ),
        (
            Rule::GasLimit,
            "not within",
            Box::new(|b| b.header.gas_limit += b.header.gas_limit / 1024),
        ),
        (
            Rule::GasUsed,
            "above the gas limit",
            Box::new(|b| b.header.gas_used = b.header.gas_limit + 1),
        ),
        (
            Rule::BaseFee,
            "is not the",
            Box::new(|b| b.header.base_fee_per_gas = b.header.base_fee_per_gas.map(|f| f + 1)),
        ),
        (Rule::BaseFee, "no base fee", Box::new(|b| b.header.base_fee_per_gas = None)),
        (Rule::Withdrawals, "no withdrawals root", Box::new(|b| b.header.withdrawals_root = None)),
        (Rule::Withdrawals, "no withdrawals list", Box::new(|b| b.body.withdrawals = None)),
        (Rule::BlobGas, "excess blob gas 20", Box::new(|b| b.header.excess_blob_gas = Some(20))),
        (Rule::BlobGas, "not a multiple", Box::new(|b| b.header.blob_gas_used = Some(1000))),
        (
            Rule::BlobGas,
            "above the block's maximum",
            Box::new(|b| b.header.blob_gas_used = Some(131_072 * 1000)),
        ),
        (
            Rule::BlobGas,
            "no parent beacon block root",
            Box::new(|b| b.header.parent_beacon_block_root = None),
        ),
        (Rule::Requests, "no requests hash", Box::new(|b| b.header.requests_hash = None)),
        (
            Rule::BlobSidecar,
            "network form",
            Box::new(move |b| b.body.transactions.push(with_sidecar.clone())),
        ),
        (Rule::BlockSize, "8388608", {
            let big = alloy_consensus::TxLegacy {
                input: vec![0u8; 9 << 20].into(),
                ..Default::default()
            };
            let big = TxEnvelope::Legacy(alloy_consensus::Signed::new_unchecked(
                big,
                alloy_primitives::Signature::new(U256::from(1), U256::from(1), false),
                B256::ZERO,
            ));
            Box::new(move |b| b.body.transactions.push(big.clone()))
        }),
    ];
    check_cases(&block, cases, |b| try_replace(&db, &spec, b));

    // Under Amsterdam the same block lacks the fields the fork adds (EIP-7928's block access
    // list hash first): refused by that rule, never with a root mismatch.
    let mut genesis: serde_json::Value =
        serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    genesis["config"]["amsterdamTime"] = serde_json::json!(header.timestamp);
    let amsterdam = ChainSpec::from_genesis_json(&genesis.to_string()).unwrap();
    assert_eq!(amsterdam.genesis_hash(), spec.genesis_hash());
    refused(
        try_replace(&db, &amsterdam, &block),
        Rule::BlockAccessList,
        "no block access list hash",
        "Amsterdam",
    );

    // The dev policy takes an equal timestamp and any base fee, and nothing else.
    let dev = spec.with_header_policy(HeaderPolicy::Dev);
    let mut equal = block.clone();
    equal.header.timestamp = reader.header(tip - 1).unwrap().unwrap().timestamp;
    let result = try_replace(&db, &dev, &equal);
    assert!(
        !matches!(
            result.as_ref().map_err(ImportError::root),
            Err(ImportError::InvalidHeader { .. })
        ),
        "{result:?}"
    );
    let mut fee = block.clone();
    fee.header.base_fee_per_gas = fee.header.base_fee_per_gas.map(|f| f + 1);
    let result = try_replace(&db, &dev, &fee);
    assert!(
        !matches!(
            result.as_ref().map_err(ImportError::root),
            Err(ImportError::InvalidHeader { .. })
        ),
        "{result:?}"
    );
    let mut before = block.clone();
    before.header.timestamp -= 100;
    refused(try_replace(&db, &dev, &before), Rule::Timestamp, "before", "dev: earlier timestamp");
    let mut no_fee = block;
    no_fee.header.base_fee_per_gas = None;
    refused(try_replace(&db, &dev, &no_fee), Rule::BaseFee, "no base fee", "dev: no base fee");
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(tip));
}
