//! Stateless execution of real mainnet (and Hoodi) blocks from their witnesses (issue 61's
//! fixtures, `../shared/fixtures/mainnet-witness/`): gas used, receipts root, bloom and the
//! post-state root must equal each block's header, which is the independent truth here.

#[path = "support/mainnet_witness.rs"]
mod mainnet_witness;

use std::path::Path;

use loupe::chain::{ChainSpec, Network};
use loupe::witness::{WitnessError, parse_block, read_witness_file, run_block, run_block_with};
use mainnet_witness::fixtures;

fn mainnet() -> ChainSpec {
    ChainSpec::named(Network::Mainnet).expect("mainnet spec")
}

const ZETH: [u64; 5] = [1_150_000, 1_920_000, 4_370_000, 15_537_394, 19_426_587];

#[test]
fn zeth_blocks_execute_statelessly_to_their_header_roots() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for n in ZETH {
        let loaded = read_witness_file(&dir.join(format!("zeth/{n}.json.gz"))).expect("reads");
        let block = loaded.block.expect("zeth files hold the block");
        assert_eq!(block.header.number, n);
        let out =
            run_block(&spec, &loaded.witness, &block).unwrap_or_else(|e| panic!("block {n}: {e}"));
        assert_eq!(out.state_root, block.header.state_root, "block {n}");
        assert_eq!(out.receipts.len(), block.body.transactions.len(), "block {n}");
    }
}

#[test]
fn nimbus_blocks_execute_statelessly_to_their_header_roots() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    let mut files: Vec<_> = std::fs::read_dir(dir.join("nimbus-persist"))
        .expect("nimbus-persist")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 20);
    let mut transactions = 0;
    for file in files {
        let loaded = read_witness_file(&file).expect("reads");
        assert_eq!(loaded.format, "nimbus");
        let block = loaded.block.expect("nimbus dumps hold the block");
        let out = run_block(&spec, &loaded.witness, &block)
            .unwrap_or_else(|e| panic!("{}: block {}: {e}", file.display(), block.header.number));
        assert_eq!(out.state_root, block.header.state_root);
        transactions += block.body.transactions.len();
    }
    // 46,147 holds mainnet's first transaction: the dumps are not all empty blocks.
    assert!(transactions > 20, "{transactions} transactions");
}

/// geth's `debug_executionWitness` for the merge block and the first Cancun block, run with
/// the blocks from the zeth files: the same roots as the zeth proofs give, and the header's.
#[test]
fn geth_witnesses_give_the_roots_the_zeth_proofs_give() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for n in [15_537_394u64, 19_426_587] {
        let zeth = read_witness_file(&dir.join(format!("zeth/{n}.json.gz"))).expect("zeth");
        let block = zeth.block.expect("block");
        let from_proofs = run_block(&spec, &zeth.witness, &block).expect("zeth run");
        let geth =
            read_witness_file(&dir.join(format!("geth-witness/debug_executionWitness-{n}.json")))
                .expect("geth witness");
        assert_eq!(geth.format, "debug_executionWitness");
        let from_geth = run_block(&spec, &geth.witness, &block).expect("geth run");
        assert_eq!(from_geth.state_root, from_proofs.state_root, "block {n}");
        assert_eq!(from_geth.state_root, block.header.state_root, "block {n}");
        assert_eq!(from_geth.receipts, from_proofs.receipts, "block {n}");
    }
}

/// A witness as loupe builds one holds the nodes a stateless run resolves (the tests of
/// `witness_archive.rs` check that each is needed): for the merge block, that set is within
/// geth's witness and no larger (geth: 1,264 nodes and 23 codes), and alone it re-executes the
/// block to the header's roots.
#[test]
fn the_nodes_a_run_needs_are_no_more_than_geths_witness() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for (n, geth_nodes, geth_codes) in [(15_537_394u64, 1_264, 23), (19_426_587, 1_060, 0)] {
        let block = read_witness_file(&dir.join(format!("zeth/{n}.json.gz")))
            .expect("zeth")
            .block
            .expect("block");
        let geth =
            read_witness_file(&dir.join(format!("geth-witness/debug_executionWitness-{n}.json")))
                .expect("geth witness")
                .witness;
        assert_eq!(geth.nodes.len(), geth_nodes, "block {n}");
        if geth_codes > 0 {
            assert_eq!(geth.codes.len(), geth_codes, "block {n}");
        }
        let run = run_block(&spec, &geth, &block).expect("geth run");
        assert!(run.nodes_used.iter().all(|h| geth.nodes.contains_key(h)));
        let mut needed = geth.clone();
        needed.nodes.retain(|h, _| run.nodes_used.contains(h));
        let again = run_block(&spec, &needed, &block).expect("the needed nodes alone");
        assert_eq!(again.state_root, block.header.state_root, "block {n}");
        println!(
            "block {n}: the run needs {} of geth's {} nodes",
            run.nodes_used.len(),
            geth.nodes.len()
        );
        assert!(run.nodes_used.len() <= geth.nodes.len());
    }
}

/// geth's Hoodi block 1,151,683 and its `ExtWitness` (cmd/keeper's example): the witness
/// lacks the account-trie node on the path of the one transaction's recipient
/// (0x00d8…5b20, read by the call), although a branch of the witness refers to it by hash.
/// geth's StateDB keeps a failed trie read as a deferred error and reads the account as
/// absent, which is presumably how geth's keeper passes it (the call sends no value to an
/// account that, absent, stays untouched); loupe refuses to take a missing node for an absent
/// account and names it; with `--missing-as-absent` (geth's reading) the block verifies.
#[test]
fn hoodi_ext_witness_lacks_the_recipients_node_and_the_run_names_it() {
    let Some(dir) = fixtures() else { return };
    let spec = ChainSpec::named(Network::Hoodi).expect("hoodi spec");
    let loaded = read_witness_file(&dir.join("hoodi/1192c3_witness.rlp")).expect("ExtWitness");
    assert_eq!(loaded.format, "geth ExtWitness");
    let block = parse_block(&std::fs::read(dir.join("hoodi/1192c3_block.rlp")).expect("block"))
        .expect("block RLP");
    assert_eq!(block.header.number, 1_151_683);
    assert!(loaded.witness.header_by_hash(block.header.parent_hash).is_some());
    assert_eq!(loaded.witness.codes.len(), 4);
    match run_block(&spec, &loaded.witness, &block) {
        Err(WitnessError::MissingNode { hash, needed_for }) => {
            assert!(!loaded.witness.nodes.contains_key(&hash));
            let referred =
                loaded.witness.nodes.values().any(|n| n.windows(32).any(|w| w == hash.as_slice()));
            assert!(referred, "{hash} is referred to by a node of the witness");
            assert!(
                needed_for.contains("0x00d8B9E957bEcc0978a9882F0Cd5E776CD7c5b20"),
                "{needed_for}"
            );
        }
        other => panic!("expected the recipient's missing node: {other:?}"),
    }
    // Read as geth reads it, the missing node gives an absent recipient; the block then
    // verifies against its header (gas used, receipts root, bloom, state root), and the one
    // read taken as absent is named.
    let out = run_block_with(&spec, &loaded.witness, &block, true).expect("geth's reading");
    assert_eq!(out.state_root, block.header.state_root);
    assert_eq!(out.unresolved.len(), 1, "{:?}", out.unresolved);
    assert!(out.unresolved[0].contains("0x00d8B9E957bEcc0978a9882F0Cd5E776CD7c5b20"));
}

/// The portal network's `block-data-N.yaml`: `header`, `body`, `receipts` as hex RLP.
fn portal(dir: &Path, n: u64) -> std::collections::HashMap<String, Vec<u8>> {
    let text =
        std::fs::read_to_string(dir.join(format!("portal/block-data-{n}.yaml"))).expect("yaml");
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), alloy_primitives::hex::decode(v.trim()).expect("hex")))
        .collect()
}

/// Receipts as the portal network encodes them: a list of `[type, status, cumulative gas,
/// logs]` (no bloom), type 0 as the empty string.
fn portal_receipts(receipts: &[alloy_consensus::ReceiptEnvelope]) -> Vec<u8> {
    use alloy_rlp::Encodable;
    let mut items = Vec::new();
    for r in receipts {
        let ty = r.tx_type() as u8;
        let status = r.status();
        let gas = r.cumulative_gas_used();
        let logs = r.logs().to_vec();
        let len = ty.length() + status.length() + gas.length() + logs.length();
        let mut item = Vec::new();
        alloy_rlp::Header { list: true, payload_length: len }.encode(&mut item);
        ty.encode(&mut item);
        status.encode(&mut item);
        gas.encode(&mut item);
        logs.encode(&mut item);
        items.push(item);
    }
    let mut out = Vec::new();
    let len = items.iter().map(Vec::len).sum();
    alloy_rlp::Header { list: true, payload_length: len }.encode(&mut out);
    for item in items {
        out.extend(item);
    }
    out
}

/// The receipts of 15,537,394 and 19,426,587 run from geth's witness with the portal
/// network's header and body, byte for byte the portal network's receipts.
#[test]
fn receipts_equal_the_portal_networks() {
    use alloy_rlp::Decodable;
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for n in [15_537_394u64, 19_426_587] {
        let data = portal(&dir, n);
        let header =
            alloy_consensus::Header::decode(&mut data["header"].as_slice()).expect("header");
        let body = alloy_consensus::BlockBody::<alloy_consensus::TxEnvelope>::decode(
            &mut data["body"].as_slice(),
        )
        .expect("body");
        let block = alloy_consensus::Block { header, body };
        let geth =
            read_witness_file(&dir.join(format!("geth-witness/debug_executionWitness-{n}.json")))
                .expect("geth witness");
        let out = run_block(&spec, &geth.witness, &block).expect("runs");
        let ours = portal_receipts(&out.receipts);
        assert!(ours == data["receipts"], "block {n}: receipts differ from the portal network's");
    }
}

/// Dropping a node the block needs fails naming that node's hash (a few nodes of geth's
/// witness for the merge block, which holds just what the block needs).
#[test]
fn a_missing_node_is_named() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    let zeth = read_witness_file(&dir.join("zeth/15537394.json.gz")).expect("zeth");
    let block = zeth.block.expect("block");
    let geth = read_witness_file(&dir.join("geth-witness/debug_executionWitness-15537394.json"))
        .expect("geth witness");
    let mut hashes: Vec<_> = geth.witness.nodes.keys().copied().collect();
    hashes.sort();
    for hash in hashes.iter().step_by(hashes.len() / 4).take(4) {
        let mut witness = geth.witness.clone();
        witness.remove_node(hash);
        match run_block(&spec, &witness, &block) {
            Err(WitnessError::MissingNode { hash: missing, needed_for }) => {
                assert_eq!(missing, *hash, "{needed_for}");
            }
            other => panic!("node {hash} dropped: {other:?}"),
        }
    }
}

/// Blocks 4,370,000 and 19,426,587 delete storage slots whose branch collapses into a sibling
/// the parent's proofs do not hold: from the proofs at the parent alone the post-state root
/// fails naming that sibling, which the zeth file's proofs at the block supply (as a prover's
/// host takes them), and with which the block verifies (the first test).
#[test]
fn a_deletions_missing_sibling_is_named_and_the_block_proofs_supply_it() {
    use std::io::Read;
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for n in [4_370_000u64, 19_426_587] {
        let path = dir.join(format!("zeth/{n}.json.gz"));
        let full = read_witness_file(&path).expect("zeth");
        let block = full.block.expect("block");
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open"))
            .read_to_string(&mut text)
            .expect("gunzip");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        let before: Vec<alloy_rpc_types_eth::EIP1186AccountProofResponse> = value["proofs"]
            .as_array()
            .expect("proofs")
            .iter()
            .filter(|pair| pair[0]["block_no"].as_u64() == Some(n - 1))
            .map(|pair| serde_json::from_value(pair[1].clone()).expect("proof"))
            .collect();
        let parent_only = loupe::witness::parse_proofs(
            &before,
            &[],
            full.witness.codes.values().cloned(),
            full.witness.headers.clone(),
        );
        match run_block(&spec, &parent_only, &block) {
            Err(WitnessError::MissingNode { hash, needed_for }) => {
                assert!(needed_for.starts_with("write slot"), "block {n}: {needed_for}");
                assert!(full.witness.nodes.contains_key(&hash), "block {n}: {hash}");
            }
            other => panic!("block {n}: expected a missing sibling: {other:?}"),
        }
    }
}

/// reth's shape of the same answer (headers as RLP hex, `keys` a list) reads to the same
/// witness as geth's (headers as JSON objects, `keys` null).
#[test]
fn reths_rlp_headers_read_as_geths_json_headers() {
    use alloy_rlp::Encodable;
    let Some(dir) = fixtures() else { return };
    let path = dir.join("geth-witness/debug_executionWitness-15537394.json");
    let geth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let from_geth = read_witness_file(&path).expect("geth shape").witness;
    let mut answer = geth[0]["response"]["result"].clone();
    let headers: Vec<String> = from_geth
        .headers
        .iter()
        .map(|h| {
            let mut rlp = Vec::new();
            h.encode(&mut rlp);
            alloy_primitives::hex::encode_prefixed(rlp)
        })
        .collect();
    answer["headers"] = serde_json::json!(headers);
    answer["keys"] = serde_json::json!(["0x00"]);
    let reth = loupe::witness::parse_execution_witness(answer).expect("reth shape");
    assert_eq!(reth.nodes, from_geth.nodes);
    assert_eq!(reth.codes, from_geth.codes);
    assert_eq!(reth.headers, from_geth.headers);
    assert_eq!(reth.keys.len(), 1);
}

/// What the outcome says the block read equals what the node that answered zeth's
/// `eth_getProof` calls at the parent said of the same accounts and slots.
#[test]
fn reads_are_the_parents_values_as_eth_get_proof_gave_them() {
    use std::io::Read;
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    let n = 15_537_394u64;
    let path = dir.join(format!("zeth/{n}.json.gz"));
    let loaded = read_witness_file(&path).expect("zeth");
    let block = loaded.block.expect("block");
    let out = run_block(&spec, &loaded.witness, &block).expect("runs");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("open"))
        .read_to_string(&mut text)
        .expect("gunzip");
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    let (mut accounts, mut slots) = (0, 0);
    for pair in value["proofs"].as_array().expect("proofs") {
        if pair[0]["block_no"].as_u64() != Some(n - 1) {
            continue;
        }
        let proof: alloy_rpc_types_eth::EIP1186AccountProofResponse =
            serde_json::from_value(pair[1].clone()).expect("proof");
        let Some(read) = out.reads.accounts.get(&proof.address) else { continue };
        accounts += 1;
        match read {
            Some(info) => {
                assert_eq!(info.balance, proof.balance, "{}", proof.address);
                assert_eq!(info.nonce, proof.nonce, "{}", proof.address);
                assert_eq!(info.code_hash, proof.code_hash, "{}", proof.address);
                if let Some(code) = &info.code {
                    assert_eq!(code.hash_slow(), proof.code_hash, "{}", proof.address);
                }
            }
            None => assert!(proof.balance.is_zero() && proof.nonce == 0, "{}", proof.address),
        }
        for sp in &proof.storage_proof {
            let slot = sp.key.as_b256().into();
            if let Some(v) = out.reads.storage.get(&proof.address).and_then(|s| s.get(&slot)) {
                assert_eq!(*v, sp.value, "{} slot {slot:#x}", proof.address);
                slots += 1;
            }
        }
    }
    assert!(accounts > 50 && slots > 100, "{accounts} accounts, {slots} slots compared");
    assert_eq!(out.reads.headers.keys().copied().collect::<Vec<_>>(), vec![n - 1]);
}

/// The block and the `ExtWitness` as hex text read as their binary RLP does.
#[test]
fn hex_text_reads_as_binary_rlp() {
    let Some(dir) = fixtures() else { return };
    let block = std::fs::read(dir.join("hoodi/1192c3_block.rlp")).expect("block");
    let witness = std::fs::read(dir.join("hoodi/1192c3_witness.rlp")).expect("witness");
    let hex = |b: &[u8]| format!("{}\n", alloy_primitives::hex::encode_prefixed(b));
    assert_eq!(
        parse_block(hex(&block).as_bytes()).expect("hex block"),
        parse_block(&block).expect("binary block")
    );
    let from_hex = loupe::witness::load_witness(hex(&witness).as_bytes()).expect("hex witness");
    let from_binary = loupe::witness::load_witness(&witness).expect("binary witness");
    assert_eq!(from_hex.witness.nodes, from_binary.witness.nodes);
    assert_eq!(from_hex.witness.codes, from_binary.witness.codes);
    assert_eq!(from_hex.witness.headers, from_binary.witness.headers);
}
