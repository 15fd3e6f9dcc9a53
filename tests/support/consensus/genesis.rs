//! A test's chain: the network it names as a genesis `config`, its genesis.json, its blocks,
//! and whether loupe can run it at all ([`setup`]).

use alloy_consensus::{Block, TxEnvelope};
use alloy_primitives::{B256, Bytes, U256};
use alloy_rlp::Decodable;
use serde_json::{Value, json};

/// A hex quantity of a fixture.
pub fn hex_u64(v: &Value) -> u64 {
    let s = v.as_str().unwrap();
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// The forks in order, with the geth `config` key that activates each.
pub const FORKS: [(&str, &str); 24] = [
    ("Frontier", ""),
    ("Homestead", "homesteadBlock"),
    ("EIP150", "eip150Block"),
    ("EIP158", "eip155Block,eip158Block"),
    ("Byzantium", "byzantiumBlock"),
    ("Constantinople", "constantinopleBlock"),
    ("ConstantinopleFix", "petersburgBlock"),
    ("Istanbul", "istanbulBlock"),
    ("MuirGlacier", "muirGlacierBlock"),
    ("Berlin", "berlinBlock"),
    ("London", "londonBlock"),
    ("ArrowGlacier", "arrowGlacierBlock"),
    ("GrayGlacier", "grayGlacierBlock"),
    ("Paris", "terminalTotalDifficulty"),
    ("Shanghai", "shanghaiTime"),
    ("Cancun", "cancunTime"),
    ("Prague", "pragueTime"),
    ("Osaka", "osakaTime"),
    ("BPO1", "bpo1Time"),
    ("BPO2", "bpo2Time"),
    ("BPO3", "bpo3Time"),
    ("BPO4", "bpo4Time"),
    ("BPO5", "bpo5Time"),
    ("Amsterdam", "amsterdamTime"),
];

pub fn fork_index(name: &str) -> Option<usize> {
    let name = if name == "Merge" { "Paris" } else { name };
    FORKS.iter().position(|(n, _)| *n == name)
}

/// The geth-style `config` of a test `network` (geth's `tests/init.go` names): `X` has every
/// fork up to X from genesis; `AToBAt5` has A's forks from genesis and B's at block 5;
/// `AToBAtTime15k` B's at time 15,000; `ArrowGlacierToParisAtDiffC0000` the merge at total
/// difficulty 0xC0000; `HomesteadToDaoAt5` the DAO fork (supported) at block 5.
pub fn network_config(network: &str) -> Option<Value> {
    let mut c = serde_json::Map::new();
    c.insert("chainId".into(), json!(1));
    let set = |c: &mut serde_json::Map<String, Value>, upto: usize, at: Value| {
        for (_, keys) in &FORKS[1..=upto] {
            for key in keys.split(',') {
                if key == "terminalTotalDifficulty" {
                    c.insert(key.into(), json!(0));
                    c.insert("mergeNetsplitBlock".into(), json!(0));
                } else {
                    c.entry(key.to_string()).or_insert(at.clone());
                }
            }
        }
    };
    if network == "HomesteadToDaoAt5" {
        set(&mut c, fork_index("Homestead")?, json!(0));
        c.insert("daoForkBlock".into(), json!(5));
        c.insert("daoForkSupport".into(), json!(true));
        return Some(Value::Object(c));
    }
    if network == "ArrowGlacierToParisAtDiffC0000" {
        set(&mut c, fork_index("ArrowGlacier")?, json!(0));
        c.insert("terminalTotalDifficulty".into(), json!(0xC0000));
        return Some(Value::Object(c));
    }
    if let Some((from, rest)) = network.split_once("To") {
        let (to, at) = if let Some(to) = rest.strip_suffix("AtTime15k") {
            (to, json!(15_000))
        } else {
            (rest.strip_suffix("At5")?, json!(5))
        };
        let (a, b) = (fork_index(from)?, fork_index(to)?);
        set(&mut c, a, json!(0));
        // The forks between A and B (inclusive of B) at the transition.
        for (_, keys) in &FORKS[a + 1..=b] {
            for key in keys.split(',') {
                c.insert(key.into(), at.clone());
            }
        }
        return Some(Value::Object(c));
    }
    set(&mut c, fork_index(network)?, json!(0));
    Some(Value::Object(c))
}

/// execution-specs' fixtures carry their chain id and blob schedule (`config`, in hex): they
/// replace the defaults, under geth's keys (`cancun`, …, `bpo2`) and alloy-genesis's spelling of
/// Amsterdam's (`Amsterdam`).
pub fn with_fixture_config(config: &mut Value, given: &Value) {
    if let Some(id) = given.get("chainid") {
        config["chainId"] = json!(hex_u64(id));
    }
    let Some(schedule) = given.get("blobSchedule").and_then(Value::as_object) else { return };
    let mut out = serde_json::Map::new();
    for (fork, p) in schedule {
        let key = if fork == "Amsterdam" { fork.clone() } else { fork.to_lowercase() };
        out.insert(
            key,
            json!({
                "target": hex_u64(&p["target"]),
                "max": hex_u64(&p["max"]),
                "baseFeeUpdateFraction": hex_u64(&p["baseFeeUpdateFraction"]),
            }),
        );
    }
    config["blobSchedule"] = Value::Object(out);
}

/// Withdrawn EIP-7610 tests: a creation onto an address that has storage but no code and no
/// nonce. No mainnet account is in that state and execution-specs removed these tests in 2026.
pub const EIP7610: [&str; 6] = [
    "InitCollision",
    "create2collisionStorage",
    "RevertInCreateInInit",
    "dynamicAccountOverwriteEmpty",
    "collisionStorage",
    "CollisionToEmpty",
];

pub fn decode_block(rlp: &str) -> Result<Block<TxEnvelope>, String> {
    let bytes: Bytes = rlp.parse().map_err(|e| format!("rlp hex: {e}"))?;
    let mut slice = bytes.as_ref();
    let block = Block::<TxEnvelope>::decode(&mut slice).map_err(|e| e.to_string())?;
    if !slice.is_empty() {
        return Err(format!("{} trailing bytes", slice.len()));
    }
    Ok(block)
}

/// The genesis.json of a test: its genesis header's fields, `pre` as the allocation, and the
/// network's config.
pub fn genesis_json(test: &Value, config: Value) -> String {
    let g = &test["genesisBlockHeader"];
    let mut out = json!({
        "config": config,
        "nonce": g["nonce"],
        "timestamp": g["timestamp"],
        "extraData": g["extraData"],
        "gasLimit": g["gasLimit"],
        "difficulty": g["difficulty"],
        "mixHash": g["mixHash"],
        "coinbase": g["coinbase"],
        "number": "0x0",
        "parentHash": g["parentHash"],
        "alloc": test["pre"],
    });
    for (from, to) in [
        ("baseFeePerGas", "baseFeePerGas"),
        ("blobGasUsed", "blobGasUsed"),
        ("excessBlobGas", "excessBlobGas"),
        ("slotNumber", "slotNumber"),
    ] {
        if let Some(v) = g.get(from) {
            out[to] = v.clone();
        }
    }
    out.to_string()
}

/// The valid blocks' chain: `Err` when a valid block does not extend the one before it (a side
/// chain), so the test's blocks do not form one chain.
pub fn one_chain(test: &Value, genesis: B256) -> Result<(), ()> {
    let mut head = genesis;
    for b in test["blocks"].as_array().unwrap() {
        if b.get("expectException").is_some() {
            continue;
        }
        let Ok(block) = decode_block(b["rlp"].as_str().unwrap()) else { return Err(()) };
        if block.header.parent_hash != head {
            return Err(());
        }
        head = block.header.hash_slow();
    }
    Ok(())
}

/// For a network whose merge is at a total difficulty (`ArrowGlacierToParisAtDiffC0000`), the
/// first block whose parent's total difficulty reaches it, along the valid blocks.
pub fn merge_block(test: &Value, ttd: U256) -> Option<u64> {
    let g = &test["genesisBlockHeader"];
    let mut td: U256 = g["difficulty"].as_str()?.parse().ok()?;
    for b in test["blocks"].as_array()? {
        if b.get("expectException").is_some() {
            continue;
        }
        let block = decode_block(b["rlp"].as_str()?).ok()?;
        if td >= ttd {
            return Some(block.header.number);
        }
        td += block.header.difficulty;
    }
    None
}

/// Why a test is not run: a listed reason (counted as a skip), or a failure to prepare it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrunnable {
    /// Skipped, for this reason.
    Skip(&'static str),
    /// Failed before any block.
    Fail(String),
}

/// What a test starts from: its genesis.json and the genesis hash the test gives.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The genesis.json ([`genesis_json`]) with the network's config.
    pub genesis: String,
    /// `genesisBlockHeader.hash`.
    pub genesis_hash: B256,
}

/// The genesis of test `name`, or why it is not run: not chosen by `LOUPE_CONSENSUS_ONLY=NAME`
/// (the tests whose names contain NAME), a withdrawn EIP-7610 test, a network not mapped, or
/// blocks that do not form one chain (side chains that win by total difficulty, which an
/// archive that imports one chain does not follow). A merge at a total difficulty gets the
/// block where it is reached as `mergeNetsplitBlock`.
pub fn setup(name: &str, test: &Value) -> Result<Setup, Unrunnable> {
    if std::env::var("LOUPE_CONSENSUS_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return Err(Unrunnable::Skip("not chosen by LOUPE_CONSENSUS_ONLY"));
    }
    if EIP7610.iter().any(|p| name.contains(p)) {
        return Err(Unrunnable::Skip("EIP-7610 (withdrawn)"));
    }
    let network = test["network"].as_str().unwrap_or_default();
    let Some(mut config) = network_config(network) else {
        return Err(Unrunnable::Fail(format!("network {network} is not mapped")));
    };
    if let Some(given) = test.get("config") {
        with_fixture_config(&mut config, given);
    }
    let genesis_hash: B256 = test["genesisBlockHeader"]["hash"].as_str().unwrap().parse().unwrap();
    if one_chain(test, genesis_hash).is_err() {
        return Err(Unrunnable::Skip("side chains"));
    }
    if config.get("mergeNetsplitBlock").is_none()
        && let Some(ttd) = config.get("terminalTotalDifficulty").and_then(Value::as_u64)
        && ttd > 0
    {
        let block = merge_block(test, U256::from(ttd)).unwrap_or(u64::MAX / 2);
        config["mergeNetsplitBlock"] = json!(block);
    }
    Ok(Setup { genesis: genesis_json(test, config), genesis_hash })
}
