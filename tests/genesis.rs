//! Streaming genesis: a large allocation is initialised through the stored trie, and its root
//! equals alloy's in-memory root of the same allocation; the same genesis (in any order) is
//! recognised again, and another one is refused with both hashes named. A public chain id with
//! another genesis needs `--allow-foreign-genesis`. A Besu genesis (its dialect, cumulative
//! milestones and fixed difficulty) initialises and imports its chain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

use alloy_consensus::TxEnvelope;
use alloy_genesis::Genesis;
use alloy_primitives::{Address, B256, U256, keccak256};
use loupe::chain::ChainSpec;

fn loupe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().expect("run loupe")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Writes a genesis with `n` accounts (every 1000th with code and storage), entries in the
/// order given by `order`.
fn write_genesis(path: &Path, n: u64, reverse: bool, bump: Option<u64>) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        f,
        r#"{{"config":{{"chainId":4242,"homesteadBlock":0,"eip150Block":0,"eip155Block":0,"eip158Block":0,"byzantiumBlock":0,"constantinopleBlock":0,"petersburgBlock":0,"istanbulBlock":0,"berlinBlock":0,"londonBlock":0,"terminalTotalDifficulty":0,"mergeNetsplitBlock":0,"shanghaiTime":0}},"difficulty":"0x0","gasLimit":"0x1c9c380","baseFeePerGas":"0x7","alloc":{{"#
    )
    .unwrap();
    let ids: Box<dyn Iterator<Item = u64>> =
        if reverse { Box::new((0..n).rev()) } else { Box::new(0..n) };
    let mut first = true;
    for i in ids {
        let address = Address::from_slice(&keccak256(i.to_be_bytes())[12..]);
        let balance = U256::from(i + 1) + U256::from(u64::from(bump == Some(i)));
        if !first {
            f.write_all(b",").unwrap();
        }
        first = false;
        if i % 1000 == 0 {
            write!(
                f,
                r#""{address:#x}":{{"balance":"{balance:#x}","nonce":"0x1","code":"0x600160005500","storage":{{"0x{:064x}":"0x{:064x}","0x{:064x}":"0x{:064x}"}}}}"#,
                1, i + 1, i + 7, 3
            )
            .unwrap();
        } else {
            write!(f, r#""{address:#x}":{{"balance":"{balance:#x}"}}"#).unwrap();
        }
    }
    f.write_all(b"}}").unwrap();
    f.flush().unwrap();
}

fn in_memory_hash(path: &Path) -> (B256, B256) {
    let genesis: Genesis = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let root = alloy_trie::root::state_root_ref_unhashed(&genesis.alloc);
    let spec = ChainSpec::from_genesis(genesis).unwrap();
    assert_eq!(spec.genesis_header().state_root, root);
    (root, spec.genesis_hash())
}

#[test]
fn a_large_genesis_streams_into_the_trie_and_is_recognised_again() {
    let dir = tempfile::tempdir().unwrap();
    let (g, reordered, other) =
        (dir.path().join("g.json"), dir.path().join("r.json"), dir.path().join("o.json"));
    const N: u64 = 120_000;
    write_genesis(&g, N, false, None);
    write_genesis(&reordered, N, true, None);
    write_genesis(&other, N, false, Some(N / 2));
    let (root, hash) = in_memory_hash(&g);

    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let out = loupe(&["init", "--datadir", d, "--genesis", g.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&hash.to_string()), "{}", text(&out));
    let db = loupe::storage::Database::open(&data).unwrap();
    let stored = db.begin_read().unwrap().header(0).unwrap().unwrap();
    assert_eq!(stored.state_root, root);
    assert_eq!(stored.hash_slow(), hash);
    drop(db);

    let out = loupe(&["verify", "--datadir", d]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("{} accounts", N)), "{}", text(&out));

    // The same allocation in the reverse order is the same genesis.
    let out = loupe(&["init", "--datadir", d, "--genesis", reordered.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("already initialised"), "{}", text(&out));

    // One balance differs: refused, naming both hashes.
    let (_, other_hash) = in_memory_hash(&other);
    let out = loupe(&["init", "--datadir", d, "--genesis", other.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    let msg = text(&out);
    assert!(msg.contains(&hash.to_string()) && msg.contains(&other_hash.to_string()), "{msg}");
}

/// The four public networks' genesis hashes, as published (geth's and reth's constants).
const NETWORKS: [(&str, &str); 4] = [
    ("mainnet", "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3"),
    ("sepolia", "0x25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9"),
    ("holesky", "0xb5f7f912443c940f21fd611f12828d75b534364ed9e95ca4e307729a4661bde4"),
    ("hoodi", "0xbbe312868b376a3001692a646dd2d7d1e4406380dfd86b98aa8a34d1557c971b"),
];

/// `loupe init --chain NAME` gives each network's published genesis hash from the binary's own
/// allocation; again is a no-op; another network's datadir is refused naming both hashes.
#[test]
fn named_networks_init_to_their_published_genesis_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, hash) in NETWORKS {
        let dir = tmp.path().join(name);
        let d = dir.to_str().unwrap();
        let out = loupe(&["init", "--datadir", d, "--chain", name]);
        assert!(out.status.success() && text(&out).contains(hash), "{name}: {}", text(&out));
        assert!(text(&out).contains("header policy strict"), "{}", text(&out));
        let again = loupe(&["init", "--datadir", d, "--chain", name]);
        assert!(
            again.status.success() && text(&again).contains("nothing to do"),
            "{}",
            text(&again)
        );
    }
    let sepolia = tmp.path().join("sepolia");
    let out = loupe(&["init", "--datadir", sepolia.to_str().unwrap(), "--chain", "mainnet"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(NETWORKS[0].1) && text(&out).contains(NETWORKS[1].1),
        "{}",
        text(&out)
    );
    // The dev header policy is refused for a named network.
    let dev = tmp.path().join("dev-mainnet");
    let out = loupe(&[
        "init",
        "--datadir",
        dev.to_str().unwrap(),
        "--chain",
        "mainnet",
        "--header-policy",
        "dev",
    ]);
    assert!(!out.status.success() && text(&out).contains("refused for mainnet"), "{}", text(&out));
}

/// A genesis file written by hand: mainnet's allocation with geth's mainnet `config` (a
/// terminal total difficulty and no `mergeNetsplitBlock`) is recognised as mainnet and gets its
/// schedule, merge included; the same file with one balance changed claims mainnet's chain id
/// with another genesis, and is refused naming both hashes.
#[test]
fn a_genesis_file_is_recognised_as_its_network_or_refused_naming_both_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut genesis: serde_json::Value =
        serde_json::from_str(&loupe::chain::Network::Mainnet.genesis_json().unwrap()).unwrap();
    genesis["config"] = serde_json::json!({
        "chainId": 1, "homesteadBlock": 1_150_000, "daoForkBlock": 1_920_000,
        "daoForkSupport": true, "eip150Block": 2_463_000, "eip155Block": 2_675_000,
        "eip158Block": 2_675_000, "byzantiumBlock": 4_370_000,
        "terminalTotalDifficulty": "58750000000000000000000"
    });
    let file = tmp.path().join("mainnet.json");
    std::fs::write(&file, genesis.to_string()).unwrap();
    let spec = ChainSpec::from_genesis_json(&genesis.to_string()).unwrap();
    assert_eq!(spec.network(), Some(loupe::chain::Network::Mainnet));
    use alloy_hardforks::EthereumHardforks;
    assert!(
        !spec.is_paris_active_at_block(15_537_393) && spec.is_paris_active_at_block(15_537_394)
    );
    assert!(
        spec.is_cancun_active_at_timestamp(1_710_338_135),
        "the network's schedule, not the file's"
    );
    let d = tmp.path().join("a");
    let out = loupe(&["init", "--datadir", d.to_str().unwrap(), "--chain", file.to_str().unwrap()]);
    assert!(out.status.success() && text(&out).contains(NETWORKS[0].1), "{}", text(&out));

    let alloc = genesis["alloc"].as_object_mut().unwrap();
    let first = alloc.keys().next().unwrap().clone();
    alloc[&first]["balance"] = serde_json::json!("0x1");
    std::fs::write(&file, genesis.to_string()).unwrap();
    let d = tmp.path().join("b");
    let out = loupe(&["init", "--datadir", d.to_str().unwrap(), "--chain", file.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("chain id 1 is mainnet's") && text(&out).contains(NETWORKS[0].1),
        "{}",
        text(&out)
    );
}

/// Sepolia's merge is at its first proof-of-stake block, 1,450,409, not at its netsplit block
/// 1,735,371 (which marks the fork id only): block rewards stop there.
#[test]
fn sepolia_merges_at_its_first_proof_of_stake_block() {
    use alloy_hardforks::EthereumHardforks;
    let spec = ChainSpec::named(loupe::chain::Network::Sepolia).unwrap();
    assert!(!spec.is_paris_active_at_block(1_450_408));
    assert!(spec.is_paris_active_at_block(1_450_409));
    assert!(spec.is_amsterdam_active_at_timestamp(1_791_294_816));
    assert_eq!(spec.dao_fork(), None, "sepolia never had the DAO fork");
    assert_eq!(
        ChainSpec::named(loupe::chain::Network::Mainnet).unwrap().dao_fork(),
        Some((1_920_000, true))
    );
}

/// Runs `loupe` with `args`, asserting it succeeds; its output.
fn loupe_ok(args: &[&str]) -> String {
    let out = loupe(args);
    assert!(out.status.success(), "loupe {args:?}: {}", text(&out));
    text(&out)
}

/// Signs a transfer of `value` wei to `to` from the first dev account, for `chain_id`.
fn transfer(chain_id: u64, nonce: u64, to: Address, value: u64) -> (TxEnvelope, Address) {
    use alloy_consensus::{SignableTransaction, TxEip1559};
    use alloy_signer::SignerSync;
    let signer = loupe::dev::dev_signers().remove(0);
    let tx = TxEip1559 {
        chain_id,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 100_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: to.into(),
        value: U256::from(value),
        access_list: Default::default(),
        input: Default::default(),
    };
    let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    (TxEnvelope::from(tx.into_signed(sig)), signer.address())
}

/// The blocks as one RLP chain file (the import format).
fn write_chain(path: &Path, blocks: &[alloy_consensus::Block<TxEnvelope>]) {
    let bytes: Vec<u8> = blocks.iter().flat_map(alloy_rlp::encode).collect();
    std::fs::write(path, bytes).unwrap();
}

/// A private chain under mainnet's chain id (issue 59): `loupe init` refuses it, naming
/// `--allow-foreign-genesis` and both genesis hashes, and writes nothing; with the flag, here
/// from a `--config` file on `import` (which initialises the datadir), it is taken under the
/// hash computed in memory from the parsed file, and a chain built on it imports, its
/// transaction signed for chain id 1.
#[test]
fn a_public_chain_id_with_another_genesis_needs_allow_foreign_genesis() {
    use loupe::chain::Network;
    use loupe::import::{GenesisSource, InitOptions, init_with};
    let tmp = tempfile::tempdir().unwrap();
    let mut genesis: serde_json::Value =
        serde_json::from_str(&loupe::dev::dev_genesis_json()).unwrap();
    genesis["config"]["chainId"] = serde_json::json!(1);
    let genesis = genesis.to_string();
    let file = tmp.path().join("chain-id-1.json");
    std::fs::write(&file, &genesis).unwrap();
    // The second path: alloy's in-memory trie over the parsed file (init streams it into the
    // database and builds the trie from there).
    let hash = ChainSpec::from_genesis_json(&genesis).unwrap().genesis_hash();

    let refused = tmp.path().join("refused");
    let out =
        loupe(&["init", "--datadir", refused.to_str().unwrap(), "--chain", file.to_str().unwrap()]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("--allow-foreign-genesis"), "the refusal names the flag: {msg}");
    assert!(msg.contains(&Network::Mainnet.genesis_hash().to_string()), "{msg}");
    assert!(msg.contains(&hash.to_string()), "{msg}");
    let db = loupe::storage::Database::open(&refused).unwrap();
    assert!(loupe::import::load_spec(&db).unwrap().is_none(), "a refused init writes nothing");
    drop(db);

    // A chain on that genesis, built in process: a transfer signed for chain id 1, then an
    // empty block.
    let built = tmp.path().join("built");
    let db = loupe::storage::Database::open(&built).unwrap();
    let options = InitOptions { foreign_chain_id: true, ..Default::default() };
    let (spec, _) = init_with(&db, GenesisSource::Json(&genesis), options).unwrap();
    assert_eq!((spec.chain_id(), spec.network()), (1, None));
    let builder = loupe::dev::BlockBuilder::new(&db, &spec);
    let (tx, sender) = transfer(1, 0, Address::repeat_byte(0x11), 7);
    let blocks =
        vec![builder.build(vec![tx], &[sender]).unwrap(), builder.build(vec![], &[]).unwrap()];
    drop(db);
    let chain = tmp.path().join("chain.rlp");
    write_chain(&chain, &blocks);

    let data = tmp.path().join("data");
    let config = tmp.path().join("loupe.toml");
    std::fs::write(
        &config,
        format!(
            "datadir = {:?}\nchain = {:?}\nallow-foreign-genesis = true\n",
            data.to_str().unwrap(),
            file.to_str().unwrap()
        ),
    )
    .unwrap();
    loupe_ok(&["import", "--config", config.to_str().unwrap(), chain.to_str().unwrap()]);
    let db = loupe::storage::Database::open(&data).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.header(0).unwrap().unwrap().hash_slow(), hash);
    assert_eq!(r.head().unwrap(), Some(2));
    assert_eq!(r.canonical_hash(2).unwrap(), Some(blocks[1].header.hash_slow()));
    drop(r);
    drop(db);

    // The flag on `init` itself; the datadir then holds the same genesis.
    let d = tmp.path().join("init");
    let d = d.to_str().unwrap();
    let f = file.to_str().unwrap();
    let out = loupe_ok(&["init", "--datadir", d, "--chain", f, "--allow-foreign-genesis"]);
    assert!(out.contains(&hash.to_string()) && out.contains("chain id 1"), "{out}");
}

/// A Besu genesis of the kind Besu's documentation shows for a private Ethash network (written
/// here, not copied): `chainID`, one milestone, a fixed difficulty, a Besu-only item, accounts
/// with `privateKey` and `comment`, balances in decimal and hex, an address without `0x`.
fn besu_genesis(fixed_difficulty: u64) -> serde_json::Value {
    let key = loupe::dev::DEV_KEYS[0];
    let sender = format!("{:x}", loupe::dev::dev_accounts()[0]);
    serde_json::json!({
        "config": {
            "chainID": 2018,
            "istanbulBlock": 0,
            "contractSizeLimit": 2147483647,
            "ethash": {"fixeddifficulty": fixed_difficulty}
        },
        "nonce": "0x42",
        "timestamp": "0x0",
        "extraData": "0x",
        "gasLimit": "0x1fffffffffffff",
        "difficulty": "0x10000",
        "mixHash": "0x0000000000000000000000000000000000000000000000000000000000000000",
        "coinbase": "0x0000000000000000000000000000000000000000",
        "alloc": {
            sender: {
                "privateKey": key,
                "comment": "loupe's first dev key: public, for tests only",
                "balance": "90000000000000000000000"
            },
            "0x00000000000000000000000000000000000000cc": {
                "comment": "a contract that stores its caller's value",
                "balance": "0x0",
                "code": "0x3460005500",
                "storage": {"0x01": "0x02"}
            }
        }
    })
}

/// The same chain as geth would need it written: every fork through Istanbul named, `chainId`,
/// no Besu fields. Parsed by alloy alone, it is the second path to the genesis hash.
fn geth_equivalent(besu: &serde_json::Value) -> Genesis {
    let mut g = besu.clone();
    g["config"] = serde_json::json!({
        "chainId": 2018, "homesteadBlock": 0, "eip150Block": 0, "eip155Block": 0,
        "eip158Block": 0, "byzantiumBlock": 0, "constantinopleBlock": 0, "petersburgBlock": 0,
        "istanbulBlock": 0, "ethash": {}
    });
    for account in g["alloc"].as_object_mut().unwrap().values_mut() {
        let a = account.as_object_mut().unwrap();
        a.remove("comment");
        a.remove("privateKey");
    }
    serde_json::from_value(g).unwrap()
}

/// Signs a legacy (EIP-155) transfer from the first dev account: Istanbul has no other kind.
fn legacy_transfer(chain_id: u64, nonce: u64, to: Address, value: u64) -> (TxEnvelope, Address) {
    use alloy_consensus::{SignableTransaction, TxLegacy};
    use alloy_signer::SignerSync;
    let signer = loupe::dev::dev_signers().remove(0);
    let tx = TxLegacy {
        chain_id: Some(chain_id),
        nonce,
        gas_price: 1_000_000_000,
        gas_limit: 21_000,
        to: to.into(),
        value: U256::from(value),
        input: Default::default(),
    };
    let sig = signer.sign_hash_sync(&tx.signature_hash()).unwrap();
    (TxEnvelope::from(tx.into_signed(sig)), signer.address())
}

/// Issue 59's Besu genesis: `comment` fields, `chainID` and `ethash.fixeddifficulty: 15`.
/// `loupe init` takes it, names the fields it drops in one warning and says it read the file
/// as Besu does, under the genesis hash of the file geth would need; a chain mined at
/// difficulty 15 on it (with the dev builder) imports through the binary, each block paying
/// Constantinople's 2 ETH (Besu's `istanbulBlock: 0` brings it); a block of difficulty 16 is
/// refused by the difficulty rule, and the same block at 15 then imports.
#[test]
fn a_besu_genesis_with_a_fixed_difficulty_imports_its_chain_and_refuses_another_difficulty() {
    use loupe::import::{GenesisSource, InitOptions, init_with};
    use revm::DatabaseRef;
    let tmp = tempfile::tempdir().unwrap();
    let besu = besu_genesis(15);
    let json = besu.to_string();
    let file = tmp.path().join("besu.json");
    std::fs::write(&file, &json).unwrap();
    let geth = ChainSpec::from_genesis(geth_equivalent(&besu)).unwrap();

    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_loupe"))
            .args(args)
            .args(["--log.filter", "info"])
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let out = run(&["init", "--datadir", d, "--chain", file.to_str().unwrap()]);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains(&geth.genesis_hash().to_string()), "geth's equivalent's hash: {log}");
    assert!(log.contains("chain id 2018"), "{log}");
    assert_eq!(log.matches("genesis fields loupe does not read").count(), 1, "{log}");
    for field in ["alloc.*.comment", "alloc.*.privateKey", "config.contractSizeLimit"] {
        assert!(log.contains(field), "the warning names {field}: {log}");
    }
    assert!(log.contains("genesis read as Besu reads it"), "{log}");
    assert!(log.contains("difficulty 15"), "{log}");

    // The chain, built in process on the same file: a transfer, then two empty blocks.
    let built = tmp.path().join("built");
    let db = loupe::storage::Database::open(&built).unwrap();
    let (spec, _) = init_with(&db, GenesisSource::Json(&json), InitOptions::default()).unwrap();
    assert_eq!(spec.genesis_hash(), geth.genesis_hash());
    let builder = loupe::dev::BlockBuilder::new(&db, &spec);
    let (tx, sender) = legacy_transfer(2018, 0, Address::repeat_byte(0x11), 7);
    let mut blocks = vec![builder.build(vec![tx], &[sender]).unwrap()];
    blocks.push(builder.build(vec![], &[]).unwrap());
    blocks.push(builder.build(vec![], &[]).unwrap());
    let next = builder.build(vec![], &[]).unwrap();
    drop(db);
    assert!(blocks.iter().all(|b| b.header.difficulty == U256::from(15)));
    let chain = tmp.path().join("chain.rlp");
    write_chain(&chain, &blocks);
    let out = run(&["import", "--datadir", d, chain.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));

    let db = loupe::storage::Database::open(&data).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.head().unwrap(), Some(3));
    for b in &blocks {
        let stored = r.header(b.header.number).unwrap().unwrap();
        assert_eq!((stored.hash_slow(), stored.difficulty), (b.header.hash_slow(), U256::from(15)));
    }
    // Three block rewards of 2 ETH (EIP-1234) and the transfer's fee, all to the coinbase.
    let coinbase = r.state_at(3).unwrap().basic_ref(Address::ZERO).unwrap().unwrap();
    let eth = U256::from(10u64).pow(U256::from(18u64));
    assert_eq!(
        coinbase.balance,
        U256::from(3) * U256::from(2) * eth + U256::from(21_000u64 * 1_000_000_000)
    );
    drop(r);
    drop(db);

    // Block 4 at difficulty 16: refused by the difficulty rule, naming both difficulties.
    let mut other = next.clone();
    other.header.difficulty = U256::from(16);
    let bad = tmp.path().join("bad.rlp");
    write_chain(&bad, std::slice::from_ref(&other));
    let out = run(&["import", "--datadir", d, bad.to_str().unwrap()]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("difficulty rule") && msg.contains("16") && msg.contains("15"), "{msg}");
    let good = tmp.path().join("good.rlp");
    write_chain(&good, std::slice::from_ref(&next));
    let out = run(&["import", "--datadir", d, good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
}
