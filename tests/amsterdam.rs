//! Amsterdam (Glamsterdam, revm 43's devnet-8) on the dev path (issue 59): blocks the dev
//! builder makes across the fork import into a second fresh datadir, their block access list
//! (EIP-7928) hashed a second way (RLP written here from the EIP's layout) and its entries
//! checked against the transactions and the system calls' EIPs; a list with one entry changed is
//! refused by its hash; a block without EIP-8282's predeploys is refused by the system contract
//! rule; `loupe dev --fork amsterdam` serves an Amsterdam chain in its own datadir; and on it,
//! EIP-7708's transfer logs, the trace namespace's gas and `debug_traceCall` agree with the
//! transactions and with `eth_call`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::Arc;

use alloy_consensus::{Block, SignableTransaction, TxEip1559, TxEnvelope};
use alloy_eip7928::AccountChanges;
use alloy_eips::{eip2935, eip4788, eip8282};
use alloy_primitives::{Address, B256, Bytes, TxKind, U256, hex, keccak256};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use loupe::chain::ChainSpec;
use loupe::dev::{BlockBuilder, DEV_CHAIN_ID, DevFork};
use loupe::import::ImportError;
use loupe::storage::Database;
use revm::DatabaseRef;
use serde_json::{Value, json};

const GWEI: u128 = 1_000_000_000;
/// EIP-7708: the address the transfer logs come from, and their topic.
const TRANSFER_LOG_ADDRESS: &str = "0xfffffffffffffffffffffffffffffffffffffffe";
/// EIP-8037 (revm 43): a new account is 120 state bytes at 1,530 gas each.
const NEW_ACCOUNT_STATE_GAS: u64 = 120 * 1530;
/// The builder's blocks are 12 s apart from genesis at 0: Amsterdam from block 3 here.
const AMSTERDAM_AT: u64 = 36;

fn transfer_topic() -> B256 {
    keccak256("Transfer(address,address,uint256)")
}

fn signers() -> Vec<PrivateKeySigner> {
    loupe::dev::dev_signers()
}

/// An EIP-1559 transaction of the dev chain (100 gwei fee cap, 1 gwei tip), signed.
fn tx(
    signer: &PrivateKeySigner,
    nonce: u64,
    to: TxKind,
    value: U256,
    input: Bytes,
    gas: u64,
) -> TxEnvelope {
    let tx = TxEip1559 {
        chain_id: DEV_CHAIN_ID,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to,
        value,
        access_list: Default::default(),
        input,
    };
    let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    tx.into_signed(sig).into()
}

/// An address no genesis allocates (outside the precompiles' range).
fn fresh(n: u8) -> Address {
    let mut a = [0xa5u8; 20];
    a[19] = n;
    Address::from(a)
}

fn init(dir: &std::path::Path, genesis: &str) -> (Database, ChainSpec) {
    let db = Database::open(dir).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, genesis).unwrap();
    (db, spec)
}

// ---------------------------------------------------------------------------------------------
// EIP-7928's RLP, written from the EIP's layout (not alloy's encoder)
// ---------------------------------------------------------------------------------------------

fn rlp_list(items: Vec<Vec<u8>>) -> Vec<u8> {
    let payload = items.concat();
    let mut out = Vec::new();
    alloy_rlp::Header { list: true, payload_length: payload.len() }.encode(&mut out);
    out.extend(payload);
    out
}

fn rlp<T: alloy_rlp::Encodable>(v: T) -> Vec<u8> {
    alloy_rlp::encode(v)
}

/// `[address, [[slot, [[index, value], …]], …], [slot, …], [[index, balance], …],
/// [[index, nonce], …], [[index, code], …]]`, slots and values as uint256.
fn account_rlp(a: &AccountChanges) -> Vec<u8> {
    let pair = |i: u64, v: Vec<u8>| rlp_list(vec![rlp(i), v]);
    rlp_list(vec![
        rlp(a.address),
        rlp_list(
            a.storage_changes
                .iter()
                .map(|s| {
                    let changes = s
                        .changes
                        .iter()
                        .map(|c| pair(c.block_access_index.get(), rlp(c.new_value)))
                        .collect();
                    rlp_list(vec![rlp(s.slot), rlp_list(changes)])
                })
                .collect(),
        ),
        rlp_list(a.storage_reads.iter().map(|s| rlp(*s)).collect()),
        rlp_list(
            a.balance_changes
                .iter()
                .map(|c| pair(c.block_access_index.get(), rlp(c.post_balance)))
                .collect(),
        ),
        rlp_list(
            a.nonce_changes
                .iter()
                .map(|c| pair(c.block_access_index.get(), rlp(c.new_nonce)))
                .collect(),
        ),
        rlp_list(
            a.code_changes
                .iter()
                .map(|c| pair(c.block_access_index.get(), rlp(&c.new_code)))
                .collect(),
        ),
    ])
}

/// keccak256 of the list's RLP.
fn bal_hash(list: &[AccountChanges]) -> B256 {
    keccak256(rlp_list(list.iter().map(account_rlp).collect()))
}

/// EIP-7928's order: accounts by address, slots by key, each change list by index, all
/// strictly increasing; every index at most `txs + 1` (post-execution).
fn assert_canonical(list: &[AccountChanges], txs: u64, what: &str) {
    let increasing = |v: Vec<U256>| v.windows(2).all(|w| w[0] < w[1]);
    assert!(list.windows(2).all(|w| w[0].address < w[1].address), "{what}: accounts unsorted");
    for a in list {
        assert!(increasing(a.storage_changes.iter().map(|s| s.slot).collect()), "{what}");
        assert!(increasing(a.storage_reads.clone()), "{what}");
        let mut indices: Vec<Vec<u64>> = a
            .storage_changes
            .iter()
            .map(|s| s.changes.iter().map(|c| c.block_access_index.get()).collect())
            .collect();
        indices.push(a.balance_changes.iter().map(|c| c.block_access_index.get()).collect());
        indices.push(a.nonce_changes.iter().map(|c| c.block_access_index.get()).collect());
        indices.push(a.code_changes.iter().map(|c| c.block_access_index.get()).collect());
        for i in indices {
            assert!(i.windows(2).all(|w| w[0] < w[1]), "{what}: {} indices unsorted", a.address);
            assert!(i.iter().all(|i| *i <= txs + 1), "{what}: {} index past the block", a.address);
        }
    }
}

fn account(list: &[AccountChanges], a: Address) -> &AccountChanges {
    list.iter().find(|c| c.address == a).unwrap_or_else(|| panic!("{a} not in the list"))
}

fn balances(a: &AccountChanges) -> Vec<(u64, U256)> {
    a.balance_changes.iter().map(|c| (c.block_access_index.get(), c.post_balance)).collect()
}

fn slot_changes(a: &AccountChanges, slot: U256) -> Vec<(u64, U256)> {
    a.storage_changes
        .iter()
        .find(|s| s.slot == slot)
        .map(|s| s.changes.iter().map(|c| (c.block_access_index.get(), c.new_value)).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The dev builder's blocks across the fork, imported into a second datadir
// ---------------------------------------------------------------------------------------------

/// The block access list `block` builds on `db`'s head state (executed apart from import).
fn execute(
    db: &Database,
    spec: &ChainSpec,
    block: &Block<TxEnvelope>,
    senders: &[Address],
) -> loupe::evm::BlockOutcome {
    let state = db.begin_read().unwrap().state_at(block.header.number - 1).unwrap();
    loupe::evm::execute_block(spec, state, block, senders, |_| {
        Err::<B256, &str>("not pre-Byzantium")
    })
    .unwrap()
}

fn balance_at(db: &Database, number: u64, a: Address) -> U256 {
    let state = db.begin_read().unwrap().state_at(number).unwrap();
    state.basic_ref(a).unwrap().map(|i| i.balance).unwrap_or_default()
}

#[test]
fn dev_builder_blocks_cross_into_amsterdam_and_import_into_a_fresh_datadir() {
    let genesis = loupe::dev::amsterdam_dev_genesis_json(AMSTERDAM_AT);
    // The genesis deploys EIP-8282's contracts (alloy's code), the exit contract with its
    // constructor's excess inhibitor; the default dev genesis schedules no Amsterdam.
    let g: Value = serde_json::from_str(&genesis).unwrap();
    let alloc = |a: Address| g["alloc"][format!("{a:#x}")].clone();
    let deposit = alloc(eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS);
    let exit = alloc(eip8282::BUILDER_EXIT_CONTRACT_ADDRESS);
    assert_eq!(deposit["code"], json!(eip8282::BUILDER_DEPOSIT_CONTRACT_CODE.to_string()));
    assert_eq!(exit["code"], json!(eip8282::BUILDER_EXIT_CONTRACT_CODE.to_string()));
    let inhibitor = U256::MAX;
    let slot0 = format!("{:#066x}", U256::ZERO);
    assert_eq!(exit["storage"][&slot0], json!(format!("{inhibitor:#066x}")));
    assert_eq!(g["config"]["amsterdamTime"], json!(AMSTERDAM_AT));
    let default: Value = serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    assert!(default["config"].get("amsterdamTime").is_none());
    assert!(
        default["alloc"].get(format!("{:#x}", eip8282::BUILDER_EXIT_CONTRACT_ADDRESS)).is_none()
    );

    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (db_a, spec_a) = init(dir_a.path(), &genesis);
    let (db_b, spec_b) = init(dir_b.path(), &genesis);
    assert_eq!(spec_a.genesis_hash(), spec_b.genesis_hash());
    let s = signers();
    let (a0, a1, a2) = (s[0].address(), s[1].address(), s[2].address());
    let eth = U256::from(10u64).pow(U256::from(18u64));
    let (x, v0, v1) = (fresh(1), U256::from(5 * GWEI), U256::from(7u64));
    let counter = a0.create(2);
    let counter_init = Bytes::from(
        hex::decode(format!("{}{}", loupe::dev::COUNTER_INIT, loupe::dev::COUNTER_RUNTIME))
            .unwrap(),
    );
    // (transactions, senders) of blocks 1..=5: Osaka, Osaka, then Amsterdam.
    let plan: Vec<(Vec<TxEnvelope>, Vec<Address>)> = vec![
        (vec![tx(&s[0], 0, TxKind::Call(a1), eth, Bytes::new(), 21_000)], vec![a0]),
        (vec![], vec![]),
        // A payment to a new account and one to an existing one. Under Amsterdam the first
        // needs EIP-8037's state gas for the account (a plain 21,000 runs out of gas).
        (
            vec![
                tx(&s[0], 1, TxKind::Call(x), v0, Bytes::new(), 500_000),
                tx(&s[1], 0, TxKind::Call(a2), v1, Bytes::new(), 100_000),
            ],
            vec![a0, a1],
        ),
        // Counter deployed, then called in the same block: a storage change.
        (
            vec![
                tx(&s[0], 2, TxKind::Create, U256::ZERO, counter_init, 1_000_000),
                tx(&s[1], 1, TxKind::Call(counter), U256::ZERO, Bytes::new(), 300_000),
            ],
            vec![a0, a1],
        ),
        (vec![], vec![]),
    ];
    let builder = BlockBuilder::new(&db_a, &spec_a);
    let blocks: Vec<(Block<TxEnvelope>, Vec<Address>)> = plan
        .into_iter()
        .map(|(txs, senders)| (builder.build(txs, &senders).unwrap(), senders))
        .collect();

    for (block, senders) in &blocks {
        let h = &block.header;
        let n = h.number;
        let amsterdam = h.timestamp >= AMSTERDAM_AT;
        assert_eq!(amsterdam, n >= 3, "block {n}");
        let outcome = execute(&db_b, &spec_b, block, senders);
        if !amsterdam {
            assert_eq!((h.block_access_list_hash, h.slot_number), (None, None), "block {n}");
            assert!(outcome.access_list.is_none(), "block {n}");
            loupe::import::import_block(&db_b, &spec_b, block, true).unwrap();
            continue;
        }
        // The slot: the builder's 12-second slots since genesis (no slot missed).
        assert_eq!(h.slot_number, Some(h.timestamp / 12), "block {n}");
        let list = outcome.access_list.clone().unwrap();
        assert_canonical(&list, block.body.transactions.len() as u64, &format!("block {n}"));
        // The header commits to the list its execution builds, hashed a second way.
        assert_eq!(h.block_access_list_hash, Some(bal_hash(&list)), "block {n}");
        assert_eq!(bal_hash(&list), alloy_eip7928::compute_block_access_list_hash(&list));
        // Every Amsterdam block: EIP-2935 stores the parent's hash at slot (n - 1) % 8191 and
        // EIP-4788 the timestamp at slot timestamp % 8191, both before the transactions (0).
        let history = account(&list, eip2935::HISTORY_STORAGE_ADDRESS);
        let slot = U256::from((n - 1) % 8191);
        assert_eq!(slot_changes(history, slot), [(0, U256::from_be_bytes(h.parent_hash.0))]);
        let beacon = account(&list, eip4788::BEACON_ROOTS_ADDRESS);
        let slot = U256::from(h.timestamp % 8191);
        assert_eq!(slot_changes(beacon, slot), [(0, U256::from(h.timestamp))]);
        // EIP-8282's system calls read both contracts; the exit contract's first one, after the
        // transactions, replaces the inhibitor by an excess of 0.
        let post = block.body.transactions.len() as u64 + 1;
        for c in [eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS, eip8282::BUILDER_EXIT_CONTRACT_ADDRESS]
        {
            account(&list, c);
        }
        let exit = account(&list, eip8282::BUILDER_EXIT_CONTRACT_ADDRESS);
        let want: Vec<(u64, U256)> = if n == 3 { vec![(post, U256::ZERO)] } else { vec![] };
        assert_eq!(slot_changes(exit, U256::ZERO), want, "block {n}");

        if n == 3 {
            check_payments(&db_b, block, &list, &outcome, (a0, a1, a2, x), (v0, v1));
            // The same block with one entry changed (the new account's balance + 1), its
            // header re-sealed with that list's hash: refused by the block access list rule.
            let mut tampered = list.clone();
            let entry = tampered.iter_mut().find(|c| c.address == x).unwrap();
            entry.balance_changes[0].post_balance += U256::from(1u64);
            let forged = alloy_eip7928::compute_block_access_list_hash(&tampered);
            assert_ne!(forged, bal_hash(&list));
            let mut bad = block.clone();
            bad.header.block_access_list_hash = Some(forged);
            let e = loupe::import::import_block(&db_b, &spec_b, &bad, true).unwrap_err();
            match &e {
                ImportError::Mismatch { number, what, expected, got, .. } => {
                    assert_eq!((*number, *what), (3, "block access list hash"));
                    assert_eq!(
                        (expected, got),
                        (&forged.to_string(), &bal_hash(&list).to_string())
                    );
                }
                other => panic!("not the block access list rule: {other}"),
            }
            assert!(e.to_string().contains("block access list hash mismatch"), "{e}");
            assert_eq!(db_b.begin_read().unwrap().head().unwrap(), Some(2));
        }
        if n == 4 {
            // Counter's deployment (code at index 1) and its first call's slot 0 = 1 (index 2).
            let c = account(&list, counter);
            let code: Vec<(u64, Bytes)> = c
                .code_changes
                .iter()
                .map(|c| (c.block_access_index.get(), c.new_code.clone()))
                .collect();
            let runtime = Bytes::from(hex::decode(loupe::dev::COUNTER_RUNTIME).unwrap());
            assert_eq!(code, [(1, runtime)]);
            assert_eq!(slot_changes(c, U256::ZERO), [(2, U256::from(1u64))]);
        }
        loupe::import::import_block(&db_b, &spec_b, block, true).unwrap();
    }
    // The second datadir holds the same chain.
    let (ra, rb) = (db_a.begin_read().unwrap(), db_b.begin_read().unwrap());
    assert_eq!(rb.head().unwrap(), Some(5));
    for n in 0..=5 {
        assert_eq!(ra.canonical_hash(n).unwrap(), rb.canonical_hash(n).unwrap(), "block {n}");
    }
}

/// Block 3's payments in its list and gas, against the transactions: `a0` pays `v0` to the new
/// account `x` (transaction 0, index 1), `a1` pays `v1` to `a2` (transaction 1, index 2).
fn check_payments(
    db: &Database,
    block: &Block<TxEnvelope>,
    list: &[AccountChanges],
    outcome: &loupe::evm::BlockOutcome,
    (a0, a1, a2, x): (Address, Address, Address, Address),
    (v0, v1): (U256, U256),
) {
    let h = &block.header;
    let gas: Vec<u64> = {
        let cumulative: Vec<u64> =
            outcome.receipts.iter().map(|r| r.cumulative_gas_used()).collect();
        vec![cumulative[0], cumulative[1] - cumulative[0]]
    };
    // EIP-1559: base fee + the 1 gwei tip (under the 100 gwei cap); the tip to the author.
    let base = U256::from(h.base_fee_per_gas.unwrap());
    let price = base + U256::from(GWEI);
    let tip = U256::from(GWEI);
    let paid = |i: usize| U256::from(gas[i]) * price;
    let before = |a: Address| balance_at(db, 2, a);
    assert_eq!(balances(account(list, x)), [(1, v0)]);
    assert!(account(list, x).nonce_changes.is_empty());
    assert_eq!(balances(account(list, a0)), [(1, before(a0) - v0 - paid(0))]);
    assert_eq!(balances(account(list, a1)), [(2, before(a1) - v1 - paid(1))]);
    assert_eq!(balances(account(list, a2)), [(2, before(a2) + v1)]);
    let nonces = |a: Address| -> Vec<(u64, u64)> {
        account(list, a)
            .nonce_changes
            .iter()
            .map(|c| (c.block_access_index.get(), c.new_nonce))
            .collect()
    };
    assert_eq!(nonces(a0), [(1, 2)]);
    assert_eq!(nonces(a1), [(2, 1)]);
    let author = h.beneficiary;
    let b = before(author);
    let gained = |i: usize| U256::from(gas[i]) * tip;
    assert_eq!(
        balances(account(list, author)),
        [(1, b + gained(0)), (2, b + gained(0) + gained(1))]
    );
    // EIP-8037/7778: the block's gas is its state gas here (one new account), larger than
    // its regular gas; the receipts count each transaction's regular and state gas.
    assert_eq!(h.gas_used, NEW_ACCOUNT_STATE_GAS);
    assert_eq!(outcome.gas_used, NEW_ACCOUNT_STATE_GAS);
    assert!(gas[0] > NEW_ACCOUNT_STATE_GAS && gas[0] + gas[1] > h.gas_used, "{gas:?}");
}

/// EIP-8282 from Amsterdam: a block whose parent state lacks either builder contract is refused
/// by the system contract rule, naming it; the blocks before the fork are not.
#[test]
fn an_amsterdam_block_without_an_eip8282_contract_is_refused_by_the_system_contract_rule() {
    for (missing, name) in [
        (eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS, "builder deposit contract"),
        (eip8282::BUILDER_EXIT_CONTRACT_ADDRESS, "builder exit contract"),
    ] {
        let mut g: Value =
            serde_json::from_str(&loupe::dev::amsterdam_dev_genesis_json(24)).unwrap();
        assert!(g["alloc"].as_object_mut().unwrap().remove(&format!("{missing:#x}")).is_some());
        let dir = tempfile::tempdir().unwrap();
        let (db, spec) = init(dir.path(), &g.to_string());
        let builder = BlockBuilder::new(&db, &spec);
        // Block 1 (12 s) is Osaka's; block 2 (24 s) the first of Amsterdam.
        assert!(builder.build(vec![], &[]).unwrap().header.block_access_list_hash.is_none());
        let e = builder.build(vec![], &[]).unwrap_err();
        match &e {
            ImportError::MissingSystemContract { number, eip, name: n, address, .. } => {
                assert_eq!((*number, *eip, *n, *address), (2, "EIP-8282", name, missing));
            }
            other => panic!("not the system contract rule: {other}"),
        }
        let text = e.to_string();
        assert!(text.contains("system contract rule (EIP-8282)") && text.contains(name), "{text}");
        assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(1));
    }
}

// ---------------------------------------------------------------------------------------------
// `loupe dev --fork amsterdam`, through the binary
// ---------------------------------------------------------------------------------------------

fn post(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp: Value =
        reqwest::blocking::Client::new().post(url).json(&body).send().unwrap().json().unwrap();
    assert!(resp.get("error").is_none(), "{method} {params}: {resp}");
    resp["result"].clone()
}

#[test]
fn loupe_dev_fork_amsterdam_serves_an_amsterdam_chain_in_its_own_datadir() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["dev", "--fork", "amsterdam", "--http.port", "0", "--http.explorer=false"])
        .env("XDG_DATA_HOME", home.path())
        .env("HOME", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut url = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(at) = line.find("serving JSON-RPC at ") {
            url = Some(line[at + "serving JSON-RPC at ".len()..].trim().to_string());
        }
        lines.push(line);
        if url.is_some() {
            break;
        }
    }
    let text = lines.join("\n");
    let url = url.unwrap_or_else(|| panic!("no URL: {text}"));
    assert!(text.contains("built the Amsterdam dev chain's sample history"), "{text}");
    assert!(text.contains("Amsterdam from genesis"), "{text}");
    let answers = (
        post(&url, "eth_config", json!([])),
        post(&url, "eth_getBlockByNumber", json!(["latest", false])),
        post(&url, "eth_getBlockByNumber", json!(["0x0", false])),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (config, head, genesis) = answers;
    // Its own datadir, beside (never in) the default dev chain's.
    assert!(home.path().join("loupe/dev-amsterdam").join(loupe::storage::DB_FILE).is_file());
    assert!(!home.path().join("loupe/dev").exists());

    // eth_config: Amsterdam is current from genesis (EIP-7910: 0 at genesis), with EIP-8282's
    // system contracts, and nothing is scheduled after it; the fork id is the genesis hash's
    // CRC32 alone (every fork at genesis: EIP-6122).
    let current = &config["current"];
    assert_eq!(current["activationTime"], json!(0));
    let contracts = &current["systemContracts"];
    let named = |k: &str| contracts[k].as_str().unwrap().parse::<Address>().unwrap();
    assert_eq!(
        named("BUILDER_DEPOSIT_CONTRACT_ADDRESS"),
        eip8282::BUILDER_DEPOSIT_CONTRACT_ADDRESS
    );
    assert_eq!(named("BUILDER_EXIT_CONTRACT_ADDRESS"), eip8282::BUILDER_EXIT_CONTRACT_ADDRESS);
    assert_eq!((&config["next"], &config["last"]), (&Value::Null, &Value::Null));
    let genesis_hash: B256 = genesis["hash"].as_str().unwrap().parse().unwrap();
    let fork_hash = alloy_eips::eip2124::ForkHash::from(genesis_hash);
    assert_eq!(current["forkId"], json!(format!("0x{}", hex::encode(fork_hash.0))));
    // The head: the 20-block sample history, the last block with its slot (12 s slots) and its
    // block access list hash.
    let n = loupe::dev::HISTORY_BLOCKS;
    assert_eq!(head["number"], json!(format!("{n:#x}")));
    assert_eq!(head["slotNumber"], json!(format!("{n:#x}")));
    assert!(head["blockAccessListHash"].as_str().is_some_and(|h| h.len() == 66), "{head}");

    // The default fork on that datadir: refused, naming --fork.
    let dir = home.path().join("loupe/dev-amsterdam");
    let out = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["dev", "--datadir", dir.to_str().unwrap(), "--http.port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--fork") && err.contains("osaka"), "{err}");
}

#[test]
fn the_dev_fork_flag_defaults_to_osaka() {
    use loupe::cli::{Cli, Command as Sub};
    let parse = |args: &[&str]| {
        Cli::parse_with_config_from(std::iter::once("loupe").chain(args.iter().copied())).unwrap()
    };
    let fork = |cli: Cli| match cli.command {
        Some(Sub::Dev(d)) => d.fork,
        other => panic!("{other:?}"),
    };
    assert_eq!(fork(parse(&["dev"])), DevFork::Osaka);
    assert_eq!(fork(parse(&["dev", "--fork", "amsterdam"])), DevFork::Amsterdam);
    assert_eq!(fork(parse(&["dev", "--fork", "osaka"])), DevFork::Osaka);
    assert!(Cli::parse_with_config_from(["loupe", "dev", "--fork", "prague"]).is_err());
    assert_eq!(DevFork::Osaka.genesis_json(), loupe::dev::dev_genesis_json());
}

// ---------------------------------------------------------------------------------------------
// The Amsterdam dev chain over RPC: EIP-7708 logs, trace gas, debug_traceCall
// ---------------------------------------------------------------------------------------------

struct Served {
    node: support::Node,
    _dir: tempfile::TempDir,
}

fn amsterdam_dev_chain() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec) = init(dir.path(), &DevFork::Amsterdam.genesis_json());
    assert_eq!(loupe::dev::build_sample_history(&db, &spec).unwrap(), 20);
    Served { node: support::Node::serve(Arc::new(db), spec, |_| {}), _dir: dir }
}

impl Served {
    fn ok(&self, method: &str, params: Value) -> Value {
        let shown = params.to_string();
        self.node.call(method, params).unwrap_or_else(|e| panic!("{method} {shown}: {e}"))
    }
}

fn q(n: u64) -> String {
    format!("{n:#x}")
}

fn num(v: &Value) -> U256 {
    v.as_str().unwrap_or_else(|| panic!("not a quantity: {v}")).parse().unwrap()
}

fn word(a: &str) -> String {
    format!("0x{:0>64}", a.trim_start_matches("0x").to_lowercase())
}

/// The EIP-7708 log of a value transfer, as `eth_getLogs` and receipts show it.
fn transfer_log(from: &str, to: &str, value: U256) -> (String, Vec<String>, String) {
    (
        TRANSFER_LOG_ADDRESS.to_string(),
        vec![format!("{:#x}", transfer_topic()), word(from), word(to)],
        format!("0x{value:064x}"),
    )
}

fn log_of(l: &Value) -> (String, Vec<String>, String) {
    (
        l["address"].as_str().unwrap().to_lowercase(),
        l["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_lowercase())
            .collect(),
        l["data"].as_str().unwrap().to_lowercase(),
    )
}

#[test]
fn transfer_logs_trace_gas_and_debug_trace_call_on_the_amsterdam_dev_chain() {
    let c = amsterdam_dev_chain();
    let head = loupe::dev::HISTORY_BLOCKS;
    let mut expected_from_a1 = Vec::new();
    let a1 = format!("{:#x}", signers()[1].address());
    let mut value_transfers = 0;
    for b in 1..=head {
        let block = c.ok("eth_getBlockByNumber", json!([q(b), true]));
        let base = num(&block["baseFeePerGas"]);
        let mut previous = 0u64;
        let replays = c.ok("trace_replayBlockTransactions", json!([q(b), ["trace", "stateDiff"]]));
        for (i, t) in block["transactions"].as_array().unwrap().iter().enumerate() {
            let hash = t["hash"].as_str().unwrap();
            let receipt = c.ok("eth_getTransactionReceipt", json!([hash]));
            // Every sample transaction succeeds under Amsterdam's gas, but block 7's, whose
            // revert is the sample.
            assert_eq!(receipt["status"], json!(if b == 7 { "0x0" } else { "0x1" }), "block {b}");
            // EIP-7708: a transaction's value to an account is logged first, from the sender to
            // the callee, by the system address; a transaction without value logs no transfer.
            let (from, value) = (t["from"].as_str().unwrap(), num(&t["value"]));
            let logs: Vec<_> = receipt["logs"].as_array().unwrap().iter().map(log_of).collect();
            let transfers = logs.iter().filter(|l| l.0 == TRANSFER_LOG_ADDRESS).count();
            match t["to"].as_str() {
                Some(to) if !value.is_zero() => {
                    let want = transfer_log(from, to, value);
                    assert_eq!(logs.first(), Some(&want), "block {b} tx {i}");
                    assert_eq!(transfers, 1, "block {b} tx {i}");
                    value_transfers += 1;
                    if from.eq_ignore_ascii_case(&a1) {
                        expected_from_a1.push((b, hash.to_string(), want));
                    }
                }
                Some(_) => assert_eq!(transfers, 0, "block {b} tx {i}: {logs:?}"),
                // (A creation with value, block 8's, logs its value and its self-destruct's.)
                None => {}
            }
            // The gas the replay charged the sender is the receipt's: its balance falls by the
            // value (returned by block 8's self-destruct) and gas used × the price EIP-1559 gives.
            let cumulative = u64::try_from(num(&receipt["cumulativeGasUsed"])).unwrap();
            let used = cumulative - previous;
            previous = cumulative;
            assert_eq!(num(&receipt["gasUsed"]), U256::from(used), "block {b} tx {i}");
            let price = match t.get("maxFeePerGas") {
                Some(cap) => (base + num(&t["maxPriorityFeePerGas"])).min(num(cap)),
                None => num(&t["gasPrice"]),
            };
            let replay = &replays[i];
            assert_eq!(replay["transactionHash"], json!(hash));
            let diff = &replay["stateDiff"][from.to_lowercase()]["balance"]["*"];
            let spent = num(&diff["from"]) - num(&diff["to"]);
            let kept = if b == 8 { U256::ZERO } else { value };
            // (Block 9's blob transaction pays its blob gas apart: 131,072 a blob, EIP-4844.)
            let blobs = t.get("blobVersionedHashes").and_then(Value::as_array).map_or(0, Vec::len);
            let blob_fee = match blobs {
                0 => U256::ZERO,
                n => U256::from(131_072 * n as u64) * num(&receipt["blobGasPrice"]),
            };
            assert_eq!(
                spent,
                kept + U256::from(used) * price + blob_fee,
                "block {b} tx {i}: {diff}"
            );
        }
        // EIP-7778: the receipts count what each transaction paid for; the block's gas (the
        // larger of its regular and state gas) is no more than that.
        assert!(previous >= u64::try_from(num(&block["gasUsed"])).unwrap(), "block {b}");
    }
    assert!(value_transfers >= 13, "{value_transfers} value transfers");

    // eth_getLogs: account 1's ETH transfers (topic1 = account 1, from the system address)
    // are exactly those of its value-bearing transactions.
    let filter = json!([{
        "fromBlock": "0x0", "toBlock": "latest", "address": TRANSFER_LOG_ADDRESS,
        "topics": [format!("{:#x}", transfer_topic()), word(&a1)],
    }]);
    let got: Vec<_> = c
        .ok("eth_getLogs", filter)
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let n = u64::try_from(num(&l["blockNumber"])).unwrap();
            (n, l["transactionHash"].as_str().unwrap().to_string(), log_of(l))
        })
        .collect();
    assert_eq!(got, expected_from_a1);
    assert_eq!(got.len(), 12, "blocks 2, 9 and 11 to 20");

    // trace_call, debug_traceCall (callTracer) and eth_call agree at Amsterdam blocks: Counter
    // returns its count, one more than the calls before (one a block from block 11).
    let a0 = format!("{:#x}", signers()[0].address());
    let call = json!({"from": a0, "to": format!("{:#x}", loupe::dev::COUNTER)});
    for b in [12u64, 20] {
        let want = format!("0x{:064x}", b - 10 + 1);
        let eth = c.ok("eth_call", json!([call, q(b)]));
        let trace = c.ok("trace_call", json!([call, ["trace"], q(b)]));
        let debug = c.ok("debug_traceCall", json!([call, q(b), {"tracer": "callTracer"}]));
        assert_eq!(eth, json!(want), "block {b}");
        assert_eq!(trace["output"], eth, "block {b}");
        assert_eq!(trace["trace"][0]["result"]["output"], eth, "block {b}");
        assert_eq!(debug["output"], eth, "block {b}");
        assert_eq!(debug["type"], json!("CALL"));
    }
    // A payment to a new account: eth_estimateGas covers EIP-8037's state gas for it, and
    // trace_call and debug_traceCall run it with that gas.
    let pay = json!({"from": a0, "to": format!("{:#x}", fresh(9)), "value": "0x1"});
    let estimate = u64::try_from(num(&c.ok("eth_estimateGas", json!([pay, "latest"])))).unwrap();
    assert!(estimate >= 12_000 + NEW_ACCOUNT_STATE_GAS, "{estimate}");
    let mut pay = pay;
    pay["gas"] = json!(q(estimate));
    let trace = c.ok("trace_call", json!([pay, ["trace"], "latest"]));
    assert!(trace["trace"][0].get("error").is_none(), "{trace}");
    let debug = c.ok("debug_traceCall", json!([pay, "latest", {"tracer": "callTracer"}]));
    assert!(debug.get("error").is_none(), "{debug}");
    assert_eq!(debug["value"], json!("0x1"));
}
