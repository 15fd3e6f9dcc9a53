//! Osaka, the BPO forks and Amsterdam on the named networks (issue 59, item 3): `eth_config` at
//! times inside each fork of each network, the blob parameters just before and at each of their
//! boundaries, and `eth_blobBaseFee` across BPO boundaries on a chain built here.
//!
//! The expected values are published ones, written out here: fork hashes from geth's
//! `core/forkid/forkid_test.go` (Sepolia's Amsterdam hash `0x6c1d9423`, not there yet, is the
//! one published with Sepolia's Glamsterdam date, ethereum/pm#2205, and carried by other
//! clients' fork-id tests); activation times from geth's `params/config.go` (Sepolia's
//! Amsterdam from geth PR #35734), checked against alloy-hardforks' constants too; blob
//! parameters from EIP-4844, EIP-7691 and EIP-7892's mainnet BPO values; names and addresses
//! from EIP-7910's text and samples and EIP-8282's predeploys. Blob fees are recomputed here
//! with EIP-4844's `fake_exponential` and EIP-7918's excess rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, OnceLock};

use alloy_eips::eip7840::BlobParams;
use alloy_hardforks::EthereumHardfork;
use alloy_primitives::U256;
use loupe::chain::{ChainSpec, Network};
use serde_json::{Value, json};

/// Which precompiles and system contracts a fork has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Set {
    Cancun,
    Prague,
    Osaka,
    Amsterdam,
}

/// One timestamp fork of a network as published.
#[derive(Debug, Clone, Copy)]
struct Fork {
    name: &'static str,
    alloy: EthereumHardfork,
    time: u64,
    fork_hash: u32,
    /// (target, max, base-fee update fraction).
    blob: (u64, u64, u128),
    set: Set,
}

/// A named network as published: chain id, deposit contract, timestamp forks from Cancun on.
#[derive(Debug)]
struct Net {
    network: Network,
    chain_id: &'static str,
    deposit: &'static str,
    /// alloy-hardforks' activation time of a fork on this network.
    alloy_time: fn(&EthereumHardfork) -> Option<u64>,
    forks: &'static [Fork],
}

/// EIP-4844 (Cancun), EIP-7691 (Prague; Osaka keeps it), EIP-7892's mainnet BPO1 and BPO2
/// (1,765,290,071 and 1,767,747,671); the testnets use the same values.
const CANCUN: (u64, u64, u128) = (3, 6, 3_338_477);
const PRAGUE: (u64, u64, u128) = (6, 9, 5_007_716);
const BPO1: (u64, u64, u128) = (10, 15, 8_346_193);
const BPO2: (u64, u64, u128) = (14, 21, 11_684_671);

const fn fork(
    name: &'static str,
    alloy: EthereumHardfork,
    time: u64,
    fork_hash: u32,
    blob: (u64, u64, u128),
    set: Set,
) -> Fork {
    Fork { name, alloy, time, fork_hash, blob, set }
}

use EthereumHardfork as H;

const MAINNET: &[Fork] = &[
    fork("Cancun", H::Cancun, 1_710_338_135, 0x9f3d2254, CANCUN, Set::Cancun),
    fork("Prague", H::Prague, 1_746_612_311, 0xc376cf8b, PRAGUE, Set::Prague),
    fork("Osaka", H::Osaka, 1_764_798_551, 0x5167e2a6, PRAGUE, Set::Osaka),
    fork("BPO1", H::Bpo1, 1_765_290_071, 0xcba2a1c0, BPO1, Set::Osaka),
    fork("BPO2", H::Bpo2, 1_767_747_671, 0x07c9462e, BPO2, Set::Osaka),
];
const SEPOLIA: &[Fork] = &[
    fork("Cancun", H::Cancun, 1_706_655_072, 0x88cf81d9, CANCUN, Set::Cancun),
    fork("Prague", H::Prague, 1_741_159_776, 0xed88b5fd, PRAGUE, Set::Prague),
    fork("Osaka", H::Osaka, 1_760_427_360, 0xe2ae4999, PRAGUE, Set::Osaka),
    fork("BPO1", H::Bpo1, 1_761_017_184, 0x56078a1e, BPO1, Set::Osaka),
    fork("BPO2", H::Bpo2, 1_761_607_008, 0x268956b6, BPO2, Set::Osaka),
    // Amsterdam schedules no blob parameters of its own: BPO2's stay in force.
    fork("Amsterdam", H::Amsterdam, 1_791_294_816, 0x6c1d9423, BPO2, Set::Amsterdam),
];
const HOLESKY: &[Fork] = &[
    fork("Cancun", H::Cancun, 1_707_305_664, 0x9b192ad0, CANCUN, Set::Cancun),
    fork("Prague", H::Prague, 1_740_434_112, 0xdfbd9bed, PRAGUE, Set::Prague),
    fork("Osaka", H::Osaka, 1_759_308_480, 0x783def52, PRAGUE, Set::Osaka),
    fork("BPO1", H::Bpo1, 1_759_800_000, 0xa280a45c, BPO1, Set::Osaka),
    fork("BPO2", H::Bpo2, 1_760_389_824, 0x9bc6cb31, BPO2, Set::Osaka),
];
const HOODI: &[Fork] = &[
    // Cancun from genesis: activation time 0.
    fork("Cancun", H::Cancun, 0, 0xbef71d30, CANCUN, Set::Cancun),
    fork("Prague", H::Prague, 1_742_999_832, 0x0929e24e, PRAGUE, Set::Prague),
    fork("Osaka", H::Osaka, 1_761_677_592, 0xe7e0e7ff, PRAGUE, Set::Osaka),
    fork("BPO1", H::Bpo1, 1_762_365_720, 0x3893353e, BPO1, Set::Osaka),
    fork("BPO2", H::Bpo2, 1_762_955_544, 0x23aa1351, BPO2, Set::Osaka),
];

const MAINNET_DEPOSIT: &str = "0x00000000219ab540356cbb839cbe05303d7705fa";

fn nets() -> [Net; 4] {
    [
        Net {
            network: Network::Mainnet,
            chain_id: "0x1",
            deposit: MAINNET_DEPOSIT,
            alloy_time: EthereumHardfork::mainnet_activation_timestamp,
            forks: MAINNET,
        },
        Net {
            network: Network::Sepolia,
            chain_id: "0xaa36a7",
            deposit: "0x7f02c3e3c98b133055b8b348b2ac625669ed295d",
            alloy_time: EthereumHardfork::sepolia_activation_timestamp,
            forks: SEPOLIA,
        },
        Net {
            network: Network::Holesky,
            chain_id: "0x4268",
            deposit: "0x4242424242424242424242424242424242424242",
            alloy_time: EthereumHardfork::holesky_activation_timestamp,
            forks: HOLESKY,
        },
        Net {
            network: Network::Hoodi,
            chain_id: "0x88bb0",
            deposit: MAINNET_DEPOSIT,
            alloy_time: EthereumHardfork::hoodi_activation_timestamp,
            forks: HOODI,
        },
    ]
}

/// Each named network's spec, built once (mainnet's genesis has 8,893 accounts).
fn spec(network: Network) -> &'static ChainSpec {
    static SPECS: OnceLock<Vec<(Network, ChainSpec)>> = OnceLock::new();
    let specs = SPECS.get_or_init(|| {
        Network::ALL.into_iter().map(|n| (n, ChainSpec::named(n).unwrap())).collect()
    });
    &specs.iter().find(|(n, _)| *n == network).unwrap().1
}

/// EIP-7910's precompile names, fork by fork, at their addresses (P256VERIFY: EIP-7951).
fn precompiles(set: Set) -> Value {
    let mut m = serde_json::Map::new();
    let mut add = |name: &str, addr: u16| {
        m.insert(name.into(), json!(format!("0x{addr:040x}")));
    };
    for (i, name) in [
        "ECREC",
        "SHA256",
        "RIPEMD160",
        "ID",
        "MODEXP",
        "BN254_ADD",
        "BN254_MUL",
        "BN254_PAIRING",
        "BLAKE2F",
        "KZG_POINT_EVALUATION",
    ]
    .into_iter()
    .enumerate()
    {
        add(name, i as u16 + 1);
    }
    if set >= Set::Prague {
        for (i, name) in [
            "BLS12_G1ADD",
            "BLS12_G1MSM",
            "BLS12_G2ADD",
            "BLS12_G2MSM",
            "BLS12_PAIRING_CHECK",
            "BLS12_MAP_FP_TO_G1",
            "BLS12_MAP_FP2_TO_G2",
        ]
        .into_iter()
        .enumerate()
        {
            add(name, i as u16 + 0x0b);
        }
    }
    if set >= Set::Osaka {
        add("P256VERIFY", 0x100);
    }
    Value::Object(m)
}

/// EIP-7910's system contracts (EIP-4788; EIP-2935, EIP-7002, EIP-7251, the deposit contract),
/// and from Amsterdam EIP-8282's builder deposit and exit predeploys.
fn system_contracts(set: Set, deposit: &str) -> Value {
    let mut m = json!({"BEACON_ROOTS_ADDRESS": "0x000f3df6d732807ef1319fb7b8bb8522d0beac02"});
    if set >= Set::Prague {
        m["CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS"] =
            json!("0x0000bbddc7ce488642fb579f8b00f3a590007251");
        m["DEPOSIT_CONTRACT_ADDRESS"] = json!(deposit);
        m["HISTORY_STORAGE_ADDRESS"] = json!("0x0000f90827f1c53a10cb7a02335b175320002935");
        m["WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS"] =
            json!("0x00000961ef480eb55e80d19ad83579a64c007002");
    }
    if set >= Set::Amsterdam {
        m["BUILDER_DEPOSIT_CONTRACT_ADDRESS"] = json!("0x0000bff46984e3725691fa540a8c7589300d8282");
        m["BUILDER_EXIT_CONTRACT_ADDRESS"] = json!("0x000064d678505ad48f8ccb093bc65613800e8282");
    }
    m
}

/// The configuration object EIP-7910 prescribes for `fork` of `net`.
fn expected(net: &Net, fork: &Fork) -> Value {
    json!({
        "activationTime": fork.time,
        "blobSchedule": {
            "baseFeeUpdateFraction": fork.blob.2,
            "max": fork.blob.1,
            "target": fork.blob.0,
        },
        "chainId": net.chain_id,
        "forkId": format!("0x{:08x}", fork.fork_hash),
        "precompiles": precompiles(fork.set),
        "systemContracts": system_contracts(fork.set, net.deposit),
    })
}

fn eth_config_at(network: Network, time: u64) -> Value {
    serde_json::to_value(loupe::rpc::eth_config_at(spec(network), time).unwrap()).unwrap()
}

/// The published activation times are alloy-hardforks' too, and the node's schedule.
#[test]
fn published_fork_times_are_alloy_hardforks_and_the_schedule_the_node_runs() {
    use alloy_hardforks::{EthereumHardforks, ForkCondition};
    for net in nets() {
        for f in net.forks {
            assert_eq!((net.alloy_time)(&f.alloy), Some(f.time), "{} {}", net.network, f.name);
            assert_eq!(
                spec(net.network).ethereum_fork_activation(f.alloy),
                ForkCondition::Timestamp(f.time),
                "{} {}",
                net.network,
                f.name
            );
        }
    }
    assert_eq!(alloy_hardforks::ethereum::SEPOLIA_AMSTERDAM_TIMESTAMP, SEPOLIA[5].time);
    // Amsterdam is scheduled on Sepolia only.
    for n in [Network::Mainnet, Network::Holesky, Network::Hoodi] {
        assert!(
            !spec(n).ethereum_fork_activation(H::Amsterdam).active_at_timestamp(u64::MAX - 1),
            "{n}"
        );
    }
}

/// `eth_config` at the first and the last second of each fork of each named network (for the
/// last fork, its first second and ten years on): `current` is that fork, `next` the one after
/// it, `last` the last scheduled (Sepolia's Amsterdam, the others' BPO2), both `null` in the
/// last fork.
#[test]
fn eth_config_on_each_named_network_at_times_in_each_of_its_forks() {
    for net in nets() {
        let genesis_time = spec(net.network).genesis_header().timestamp;
        let final_fork = net.forks.last().unwrap();
        for (i, f) in net.forks.iter().enumerate() {
            let after = net.forks.get(i + 1);
            let first = f.time.max(genesis_time);
            let end = after.map_or(f.time + 10 * 365 * 86_400, |a| a.time - 1);
            for time in [first, first + 1, end] {
                let got = eth_config_at(net.network, time);
                let at = format!("{} at {time} ({})", net.network, f.name);
                assert_eq!(got["current"], expected(&net, f), "{at}: current");
                match after {
                    Some(a) => {
                        assert_eq!(got["next"], expected(&net, a), "{at}: next");
                        assert_eq!(got["last"], expected(&net, final_fork), "{at}: last");
                    }
                    None => {
                        assert_eq!(got["next"], Value::Null, "{at}: next");
                        assert_eq!(got["last"], Value::Null, "{at}: last");
                    }
                }
            }
        }
    }
}

/// Before Cancun EIP-7910 describes nothing: the networks that started before it answer with
/// an error there (Hoodi started in Cancun).
#[test]
fn eth_config_before_cancun_is_an_error() {
    for net in nets().into_iter().filter(|n| n.forks[0].time > 0) {
        let err = loupe::rpc::eth_config_at(spec(net.network), net.forks[0].time - 1).unwrap_err();
        assert!(err.to_string().contains("Cancun"), "{}: {err}", net.network);
    }
}

/// EIP-7910's own samples: its "Hoodi Cancun Config" and "Hoodi Prague Config", served by
/// `eth_config` over JSON-RPC on a Hoodi datadir just initialised (its head is the genesis
/// block, whose timestamp 1,742,212,800 is before Prague), as `current` and `next` — the
/// EIP's "with future fork scheduled" example; `last` is now Hoodi's BPO2.
#[test]
fn eth_config_rpc_on_a_new_hoodi_datadir_gives_eip_7910s_samples() {
    const HOODI_CANCUN: &str = r#"{
      "activationTime": 0,
      "blobSchedule": {"baseFeeUpdateFraction": 3338477, "max": 6, "target": 3},
      "chainId": "0x88bb0",
      "forkId": "0xbef71d30",
      "precompiles": {
        "BLAKE2F": "0x0000000000000000000000000000000000000009",
        "BN254_ADD": "0x0000000000000000000000000000000000000006",
        "BN254_MUL": "0x0000000000000000000000000000000000000007",
        "BN254_PAIRING": "0x0000000000000000000000000000000000000008",
        "ECREC": "0x0000000000000000000000000000000000000001",
        "ID": "0x0000000000000000000000000000000000000004",
        "KZG_POINT_EVALUATION": "0x000000000000000000000000000000000000000a",
        "MODEXP": "0x0000000000000000000000000000000000000005",
        "RIPEMD160": "0x0000000000000000000000000000000000000003",
        "SHA256": "0x0000000000000000000000000000000000000002"
      },
      "systemContracts": {"BEACON_ROOTS_ADDRESS": "0x000f3df6d732807ef1319fb7b8bb8522d0beac02"}
    }"#;
    const HOODI_PRAGUE: &str = r#"{
      "activationTime": 1742999832,
      "blobSchedule": {"baseFeeUpdateFraction": 5007716, "max": 9, "target": 6},
      "chainId": "0x88bb0",
      "forkId": "0x0929e24e",
      "precompiles": {
        "BLAKE2F": "0x0000000000000000000000000000000000000009",
        "BLS12_G1ADD": "0x000000000000000000000000000000000000000b",
        "BLS12_G1MSM": "0x000000000000000000000000000000000000000c",
        "BLS12_G2ADD": "0x000000000000000000000000000000000000000d",
        "BLS12_G2MSM": "0x000000000000000000000000000000000000000e",
        "BLS12_MAP_FP2_TO_G2": "0x0000000000000000000000000000000000000011",
        "BLS12_MAP_FP_TO_G1": "0x0000000000000000000000000000000000000010",
        "BLS12_PAIRING_CHECK": "0x000000000000000000000000000000000000000f",
        "BN254_ADD": "0x0000000000000000000000000000000000000006",
        "BN254_MUL": "0x0000000000000000000000000000000000000007",
        "BN254_PAIRING": "0x0000000000000000000000000000000000000008",
        "ECREC": "0x0000000000000000000000000000000000000001",
        "ID": "0x0000000000000000000000000000000000000004",
        "KZG_POINT_EVALUATION": "0x000000000000000000000000000000000000000a",
        "MODEXP": "0x0000000000000000000000000000000000000005",
        "RIPEMD160": "0x0000000000000000000000000000000000000003",
        "SHA256": "0x0000000000000000000000000000000000000002"
      },
      "systemContracts": {
        "BEACON_ROOTS_ADDRESS": "0x000f3df6d732807ef1319fb7b8bb8522d0beac02",
        "CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS": "0x0000bbddc7ce488642fb579f8b00f3a590007251",
        "DEPOSIT_CONTRACT_ADDRESS": "0x00000000219ab540356cbb839cbe05303d7705fa",
        "HISTORY_STORAGE_ADDRESS": "0x0000f90827f1c53a10cb7a02335b175320002935",
        "WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS": "0x00000961ef480eb55e80d19ad83579a64c007002"
      }
    }"#;
    let tmp = tempfile::tempdir().unwrap();
    let db = loupe::storage::Database::open(tmp.path()).unwrap();
    let genesis = Network::Hoodi.genesis_json().unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &genesis).unwrap();
    assert_eq!(spec.network(), Some(Network::Hoodi));
    let node = support::Node::serve(Arc::new(db), spec, |_| {});
    let head = node.call("eth_getBlockByNumber", json!(["latest", false])).unwrap();
    assert_eq!(head["number"], "0x0");
    assert_eq!(head["timestamp"], json!(format!("{:#x}", 1_742_212_800u64)));
    let got = node.call("eth_config", json!([])).unwrap();
    assert_eq!(got["current"], serde_json::from_str::<Value>(HOODI_CANCUN).unwrap());
    assert_eq!(got["next"], serde_json::from_str::<Value>(HOODI_PRAGUE).unwrap());
    let hoodi = &nets()[3];
    assert_eq!(got["last"], expected(hoodi, &HOODI[4]));
}

fn triple(p: &BlobParams) -> (u64, u64, u128) {
    (p.target_blob_count, p.max_blob_count, p.update_fraction)
}

/// `ChainSpec::blob_params_at` just before and at each fork of each named network: the
/// previous fork's parameters, then the fork's; none before Cancun. From Osaka on the blob base
/// cost of EIP-7918 (2^13) and EIP-7594's six blobs per transaction come with them.
#[test]
fn blob_parameters_just_before_and_at_each_fork_of_each_named_network() {
    for net in nets() {
        let spec = spec(net.network);
        let mut before: Option<(u64, u64, u128)> = None;
        for f in net.forks {
            if f.time > 0 {
                let p = spec.blob_params_at(f.time - 1);
                assert_eq!(p.as_ref().map(triple), before, "{} before {}", net.network, f.name);
            }
            let p = spec.blob_params_at(f.time).unwrap();
            assert_eq!(triple(&p), f.blob, "{} at {}", net.network, f.name);
            let osaka = f.set >= Set::Osaka;
            assert_eq!(p.blob_base_cost, if osaka { 1 << 13 } else { 0 }, "{}", f.name);
            assert_eq!(p.max_blobs_per_tx, if osaka { 6 } else { f.blob.1 }, "{}", f.name);
            before = Some(f.blob);
        }
    }
    // The published BPO values are alloy-eips' EIP-7892 constants too.
    assert_eq!(triple(&BlobParams::bpo1()), BPO1);
    assert_eq!(triple(&BlobParams::bpo2()), BPO2);
}

/// EIP-4844's `fake_exponential(factor, numerator, denominator)`, as its pseudo-code.
fn fake_exponential(factor: u64, numerator: u64, denominator: u128) -> U256 {
    let (factor, numerator, denominator) =
        (U256::from(factor), U256::from(numerator), U256::from(denominator));
    let mut i = U256::from(1);
    let mut output = U256::ZERO;
    let mut accum = factor * denominator;
    while accum > U256::ZERO {
        output += accum;
        accum = accum * numerator / (denominator * i);
        i += U256::from(1);
    }
    output / denominator
}

/// Blob gas per blob (EIP-4844) and the blob base cost of EIP-7918.
const GAS_PER_BLOB: u64 = 1 << 17;
const BLOB_BASE_COST: u64 = 1 << 13;

/// The excess blob gas of a block whose parent had these values, under the block's own fork's
/// (target, max, fraction): EIP-4844's rule with EIP-7918's reserve price (Osaka on), and
/// whether the reserve price decided it.
fn excess_blob_gas(
    parent_excess: u64,
    parent_used: u64,
    parent_base_fee: u64,
    (target, max, fraction): (u64, u64, u128),
) -> (u64, bool) {
    if parent_excess + parent_used < target * GAS_PER_BLOB {
        return (0, false);
    }
    let reserve = U256::from(BLOB_BASE_COST) * U256::from(parent_base_fee);
    if reserve > U256::from(GAS_PER_BLOB) * fake_exponential(1, parent_excess, fraction) {
        (parent_excess + parent_used * (max - target) / max, true)
    } else {
        (parent_excess + parent_used - target * GAS_PER_BLOB, false)
    }
}

fn quantity(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// A chain of 12-second blocks from genesis time 0 with Osaka from genesis, BPO1 at 36 and
/// BPO2 at 72 (the mainnet values), and a genesis excess blob gas of 200,000,000 with six
/// blobs' gas used, so that blob prices are far above the minimum and the update fraction shows.
/// At every head, `eth_blobBaseFee` is the next block's blob base fee computed here: its
/// excess from the head's under the parameters at the next block's time (head + 12 s), priced
/// with that fork's fraction; the block then built has that excess. The head at 24 s (block 2)
/// already answers with BPO1's fraction, the one at 60 s with BPO2's; the excess rule takes
/// EIP-4844's branch across BPO1 and EIP-7918's reserve price from BPO2 on. `eth_config` over
/// RPC names the fork at each head, with fork ids from EIP-2124's CRC32 computed here.
#[test]
fn eth_blob_base_fee_across_bpo_boundaries_is_the_next_blocks() {
    let osaka = PRAGUE;
    let fork_at = |t: u64| match t {
        0..36 => osaka,
        36..72 => BPO1,
        _ => BPO2,
    };
    let mut genesis: Value = serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    let blob =
        |(t, m, f): (u64, u64, u128)| json!({"target": t, "max": m, "baseFeeUpdateFraction": f});
    genesis["config"]["bpo1Time"] = json!(36);
    genesis["config"]["bpo2Time"] = json!(72);
    genesis["config"]["blobSchedule"]["bpo1"] = blob(BPO1);
    genesis["config"]["blobSchedule"]["bpo2"] = blob(BPO2);
    genesis["excessBlobGas"] = json!(format!("{:#x}", 200_000_000u64));
    genesis["blobGasUsed"] = json!(format!("{:#x}", 6 * GAS_PER_BLOB));
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(loupe::storage::Database::open(tmp.path()).unwrap());
    let (spec, _) = loupe::import::init_genesis(&db, &genesis.to_string()).unwrap();
    let genesis_hash = spec.genesis_hash();
    let node = support::Node::serve(db.clone(), spec.clone(), |_| {});
    let call = |m: &str, p: Value| node.call(m, p).unwrap();
    let fork_id = |times: &[u64]| {
        let mut bytes = genesis_hash.to_vec();
        for t in times {
            bytes.extend_from_slice(&t.to_be_bytes());
        }
        format!("0x{:08x}", crc32fast::hash(&bytes))
    };
    let mut branches = Vec::new();
    // The blob base fee of blocks 1, 2, …, as computed here.
    let mut prices = Vec::new();
    for n in 0..=11u64 {
        let head = call("eth_getBlockByNumber", json!(["latest", false]));
        assert_eq!(quantity(&head["number"]), n);
        let time = quantity(&head["timestamp"]);
        assert_eq!(time, 12 * n);
        let next = fork_at(time + 12);
        let (excess, reserve) = excess_blob_gas(
            quantity(&head["excessBlobGas"]),
            quantity(&head["blobGasUsed"]),
            quantity(&head["baseFeePerGas"]),
            next,
        );
        branches.push(reserve);
        let want = fake_exponential(1, excess, next.2);
        let fee: U256 = serde_json::from_value(call("eth_blobBaseFee", json!([]))).unwrap();
        assert_eq!(fee, want, "eth_blobBaseFee at head {n} (time {time})");
        // The fee history's entry for the block after the head is the same.
        let history = call("eth_feeHistory", json!(["0x1", "latest", []]));
        let next_entry: U256 =
            serde_json::from_value(history["baseFeePerBlobGas"][1].clone()).unwrap();
        assert_eq!(next_entry, want, "eth_feeHistory at head {n}");
        if time + 12 == 36 || time + 12 == 72 {
            // The head just before a boundary: the fork it is in would price it otherwise.
            let (old_excess, _) = excess_blob_gas(
                quantity(&head["excessBlobGas"]),
                quantity(&head["blobGasUsed"]),
                quantity(&head["baseFeePerGas"]),
                fork_at(time),
            );
            assert_ne!(fake_exponential(1, old_excess, fork_at(time).2), want, "head {n}");
        }
        // eth_config names the fork in force at the head.
        let config = call("eth_config", json!([]));
        let (activation, ids): (u64, &[u64]) = match time {
            0..36 => (0, &[]),
            36..72 => (36, &[36]),
            _ => (72, &[36, 72]),
        };
        let (target, max, fraction) = fork_at(time);
        assert_eq!(config["current"]["activationTime"], json!(activation), "head {n}");
        assert_eq!(
            config["current"]["blobSchedule"],
            json!({"target": target, "max": max, "baseFeeUpdateFraction": fraction}),
            "head {n}"
        );
        assert_eq!(config["current"]["forkId"], json!(fork_id(ids)), "head {n}");
        let upcoming = match time {
            0..36 => Some((36, fork_id(&[36]))),
            36..72 => Some((72, fork_id(&[36, 72]))),
            _ => None,
        };
        match upcoming {
            Some((t, id)) => {
                assert_eq!(config["next"]["activationTime"], json!(t), "head {n}");
                assert_eq!(config["next"]["forkId"], json!(id), "head {n}");
                assert_eq!(config["last"]["activationTime"], json!(72), "head {n}");
            }
            None => assert_eq!((&config["next"], &config["last"]), (&Value::Null, &Value::Null)),
        }
        // The block after the head has the excess computed above, at head + 12 s.
        let block = loupe::dev::BlockBuilder::new(&db, &spec).build(Vec::new(), &[]).unwrap();
        assert_eq!(block.header.timestamp, time + 12);
        assert_eq!(block.header.excess_blob_gas, Some(excess), "block {}", n + 1);
        prices.push(want);
    }
    // Both branches of the excess rule were taken.
    assert!(branches.contains(&true) && branches.contains(&false), "{branches:?}");
    // Over stored blocks, eth_feeHistory gives each block's own blob base fee, and for the block
    // after `newestBlock` (stored too) that block's: the prices computed above.
    let history = call("eth_feeHistory", json!(["0xa", "0xa", []]));
    let got: Vec<U256> = serde_json::from_value(history["baseFeePerBlobGas"].clone()).unwrap();
    assert_eq!(got, prices[0..11], "blocks 1 to 11");
}

/// A BPO fork after Amsterdam keeps Amsterdam's precompiles and system contracts (and one
/// before it Osaka's), with its own blob parameters; Amsterdam itself keeps the BPO
/// parameters in force before it. A genesis file of its own: no named network schedules one.
#[test]
fn a_bpo_fork_after_amsterdam_keeps_amsterdams_sets() {
    let mut genesis: Value = serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    let blob =
        |(t, m, f): (u64, u64, u128)| json!({"target": t, "max": m, "baseFeeUpdateFraction": f});
    genesis["config"]["bpo1Time"] = json!(50);
    genesis["config"]["amsterdamTime"] = json!(100);
    genesis["config"]["bpo2Time"] = json!(200);
    genesis["config"]["blobSchedule"]["bpo1"] = blob(BPO1);
    genesis["config"]["blobSchedule"]["bpo2"] = blob(BPO2);
    let spec = ChainSpec::from_genesis_json(&genesis.to_string()).unwrap();
    let zero = "0x0000000000000000000000000000000000000000";
    let at = |t: u64| {
        serde_json::to_value(loupe::rpc::eth_config_at(&spec, t).unwrap()).unwrap()["current"]
            .clone()
    };
    for (time, activation, set, params) in [
        (60, 50, Set::Osaka, BPO1),
        (100, 100, Set::Amsterdam, BPO1),
        (150, 100, Set::Amsterdam, BPO1),
        (200, 200, Set::Amsterdam, BPO2),
    ] {
        let c = at(time);
        assert_eq!(c["activationTime"], json!(activation), "at {time}");
        assert_eq!(c["blobSchedule"], blob(params), "at {time}");
        assert_eq!(c["precompiles"], precompiles(set), "at {time}");
        assert_eq!(c["systemContracts"], system_contracts(set, zero), "at {time}");
    }
}
