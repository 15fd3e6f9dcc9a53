//! `loupe witness run` through the binary: exit code 0 and the summary line when every root
//! holds, a non-zero exit naming the mismatch when the header is tampered with (mainnet block
//! 15,537,394 with geth's `debug_executionWitness`, issue 61's fixtures).

#[path = "support/mainnet_witness.rs"]
mod mainnet_witness;

#[path = "common/served.rs"]
mod served;

use std::path::Path;
use std::process::{Command, Output};

use alloy_rlp::{Decodable, Encodable};
use mainnet_witness::{fixtures, zeth_json};

fn loupe(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().expect("runs loupe")
}

const N: u64 = 15_537_394;

/// The block as `eth_getBlockByNumber(N, true)` answered it (inside a JSON-RPC envelope), from
/// the zeth host cache.
fn block_json(dir: &Path) -> serde_json::Value {
    let zeth = zeth_json(dir, N);
    let block = zeth["full_blocks"]
        .as_array()
        .expect("full_blocks")
        .iter()
        .find(|pair| pair[0]["block_no"].as_u64() == Some(N))
        .expect("the block")[1]
        .clone();
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": block})
}

#[test]
fn witness_run_exits_zero_when_every_root_holds_and_names_a_mismatch() {
    let Some(dir) = fixtures() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let witness = dir.join(format!("geth-witness/debug_executionWitness-{N}.json"));

    let json = tmp.path().join("block.json");
    std::fs::write(&json, block_json(&dir).to_string()).expect("write");
    let out = loupe(&[
        "witness".as_ref(),
        "run".as_ref(),
        "--witness".as_ref(),
        witness.as_os_str(),
        "--block".as_ref(),
        json.as_os_str(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // The header's state root, as the portal network's header has it.
    let yaml =
        std::fs::read_to_string(dir.join(format!("portal/block-data-{N}.yaml"))).expect("yaml");
    let header_hex = yaml.lines().find_map(|l| l.strip_prefix("header: ")).expect("header");
    let header_rlp = alloy_primitives::hex::decode(header_hex.trim()).expect("hex");
    let mut header = alloy_consensus::Header::decode(&mut header_rlp.as_slice()).expect("header");
    assert!(stdout.contains(&format!("block {N} ")), "{stdout}");
    assert!(stdout.contains(&format!("state root {} ok", header.state_root)), "{stdout}");

    // The same block as RLP with its receipts root changed: refused, naming it.
    let body_hex = yaml.lines().find_map(|l| l.strip_prefix("body: ")).expect("body");
    let body_rlp = alloy_primitives::hex::decode(body_hex.trim()).expect("hex");
    let body =
        alloy_consensus::BlockBody::<alloy_consensus::TxEnvelope>::decode(&mut body_rlp.as_slice())
            .expect("body");
    let good = header.receipts_root;
    header.receipts_root = alloy_primitives::B256::repeat_byte(0x11);
    let block = alloy_consensus::Block { header, body };
    let mut rlp = Vec::new();
    block.encode(&mut rlp);
    let tampered = tmp.path().join("block.rlp");
    std::fs::write(&tampered, &rlp).expect("write");
    let out = loupe(&[
        "witness".as_ref(),
        "run".as_ref(),
        "--witness".as_ref(),
        witness.as_os_str(),
        "--block".as_ref(),
        tampered.as_os_str(),
        "--chain".as_ref(),
        "mainnet".as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a tampered header passed");
    assert!(
        stderr.contains(&format!(
            "receipts root mismatch: header has {}, execution gives {good}",
            block.header.receipts_root
        )),
        "{stderr}"
    );
}

/// The proofs of the zeth host cache for the merge block, at `block_no`: address → answer.
fn zeth_proofs(dir: &Path, block_no: u64) -> Vec<serde_json::Value> {
    zeth_json(dir, N)["proofs"]
        .as_array()
        .expect("proofs")
        .iter()
        .filter(|pair| pair[0]["block_no"].as_u64() == Some(block_no))
        .map(|pair| pair[1].clone())
        .collect()
}

/// `loupe witness serve` on the merge block's zeth host cache: the block and both states served
/// by the node's ordinary paths, checked against the mainnet node's own answers the cache
/// holds (`eth_getProof` at the parent and at the block: balances and nonces).
#[test]
fn witness_serve_answers_as_mainnet_did() {
    use serde_json::{Value, json};
    let Some(dir) = fixtures() else { return };
    // The node picks its own port and names it in its log (stderr): a port the test picked and
    // let go could be taken by another test's server first, which then answered these calls.
    let mut child = Command::new(env!("CARGO_BIN_EXE_loupe"))
        .args(["witness", "serve", "--witness"])
        .arg(dir.join(format!("zeth/{N}.json.gz")))
        .args(["--http.port", "0", "--log.filter", "info"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let log = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut sent = false;
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            if !sent && let Some(url) = served::served_url(&line) {
                let _ = tx.send(url);
                sent = true;
            }
        }
    });
    let url = match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(url) => format!("{url}/"),
        Err(_) => panic!("loupe witness serve did not serve: {:?}", child.try_wait()),
    };
    let client = reqwest::blocking::Client::new();
    let call = |method: &str, params: Value| -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let v: Value = client.post(&url).json(&body).send().ok()?.json().ok()?;
        Some(v["result"].clone())
    };
    let started = std::time::Instant::now();
    while call("eth_chainId", json!([])).is_none() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("loupe witness serve exited with {status} before serving");
        }
        assert!(started.elapsed().as_secs() < 120, "not serving after 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let checked = (|| {
        let block = call("eth_getBlockByNumber", json!([format!("{N:#x}"), false]))?;
        let want = block_json(&dir)["result"].clone();
        assert_eq!(block["hash"], want["hash"]);
        assert_eq!(block["transactions"].as_array()?.len(), want["transactions"].as_array()?.len());
        let receipts = call("eth_getBlockReceipts", json!([format!("{N:#x}")]))?;
        assert_eq!(receipts.as_array()?.len(), want["transactions"].as_array()?.len());
        let mut compared = 0;
        for at in [N - 1, N] {
            for proof in zeth_proofs(&dir, at) {
                let (address, tag) = (&proof["address"], format!("{at:#x}"));
                let balance = call("eth_getBalance", json!([address, tag]))?;
                assert_eq!(balance, proof["balance"], "balance of {address} at {at}");
                let nonce = call("eth_getTransactionCount", json!([address, tag]))?;
                assert_eq!(nonce, proof["nonce"], "nonce of {address} at {at}");
                compared += 1;
            }
        }
        let trace = call("trace_block", json!([format!("{N:#x}")]))?;
        assert!(trace.as_array()?.len() >= want["transactions"].as_array()?.len());
        Some(compared)
    })();
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let compared = checked.expect("every answer");
    assert!(compared > 200, "{compared} accounts compared");
}
