//! Frozen history (`storage::segments`): the execution-apis chain imported with history epochs
//! of 4 blocks and an unwind window of 4, so that closed epochs move into segment files as the
//! import goes and merge eight at a time. Every read method at every block must answer exactly
//! as the same chain does with nothing frozen (a second datadir, and the same datadir before its
//! window was narrowed), `verify --history` must pass across the B-tree and the segments, and a
//! copy must carry the segments with it.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::path::Path;
use std::sync::Arc;

use crate::support::splitmix64;
use loupe::chain::ChainSpec;
use loupe::import::{ImportOptions, StateRootCheck, import_files_with};
use loupe::storage::Database;
use loupe::storage::history::keys::{Epochs, row_epoch};
use serde_json::{Value, json};

/// The fixture chain in `dir`, epochs of 4 blocks, with `depth` as the unwind window from the
/// start (`None`: the default, 1,024 blocks, which freezes nothing on this chain).
fn import(dir: &Path, depth: Option<u64>) -> Option<(Arc<Database>, ChainSpec)> {
    import_keeping(dir, depth, loupe::storage::segments::ProofHistory::All, StateRootCheck::Block)
}

/// [`import`] into a datadir initialised to keep `proofs`, checking state roots as `roots`
/// says.
fn import_keeping(
    dir: &Path,
    depth: Option<u64>,
    proofs: loupe::storage::segments::ProofHistory,
    roots: StateRootCheck,
) -> Option<(Arc<Database>, ChainSpec)> {
    import_in_groups(dir, depth, proofs, roots, 3)
}

/// [`import_keeping`] in groups of `batch` blocks (durable every other group), each of which
/// freezes at its commit the epochs its head moves left behind.
fn import_in_groups(
    dir: &Path,
    depth: Option<u64>,
    proofs: loupe::storage::segments::ProofHistory,
    roots: StateRootCheck,
    batch: u64,
) -> Option<(Arc<Database>, ChainSpec)> {
    let (db, spec, fx) = init(dir, depth, Some(proofs))?;
    let options =
        ImportOptions { batch, sync_every: 2 * batch, state_root: roots, ..Default::default() };
    import_files_with(&db, &spec, &[fx.join("chain.rlp")], options).unwrap();
    Some((Arc::new(db), spec))
}

/// A datadir in `dir` with epochs of 4 blocks, initialised from the fixture chain's genesis to
/// keep `proofs` (the default when `None`), with an unwind window of `depth` blocks if given;
/// with the fixtures' folder.
fn init(
    dir: &Path,
    depth: Option<u64>,
    proofs: Option<loupe::storage::segments::ProofHistory>,
) -> Option<(Database, ChainSpec, std::path::PathBuf)> {
    let fx = support::fixtures()?;
    let db = Database::open_with_epochs(dir, Epochs { len: 4 }).unwrap();
    let genesis = std::fs::read_to_string(fx.join("genesis.json")).unwrap();
    let options = loupe::import::InitOptions { proof_history: proofs, ..Default::default() };
    let (spec, _) =
        loupe::import::init_with(&db, loupe::import::GenesisSource::Json(&genesis), options)
            .unwrap();
    if let Some(depth) = depth {
        let w = db.begin_write().unwrap();
        w.set_unwind_depth(depth).unwrap();
        w.commit(true).unwrap();
    }
    Some((db, spec, fx))
}

fn manifest(db: &Database) -> loupe::storage::segments::Manifest {
    let r = db.begin_write().unwrap();
    let m = loupe::storage::segments::Manifest::read(
        &r.transaction().open_table(loupe::storage::tables::META).unwrap(),
    )
    .unwrap();
    drop(r);
    m
}

/// Every read method whose answer depends on history or block data, at every block, for
/// every account the chain names: the answers in order.
fn answers(node: &support::Node, head: u64) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut call = |method: &str, params: Value| {
        let answer = match node.call(method, params.clone()) {
            Ok(r) => r,
            Err(e) => json!({"error": e}),
        };
        out.push((format!("{method} {params}"), answer));
    };
    // The accounts: every sender, recipient, created contract and miner of the chain, and the
    // genesis allocation.
    let mut addresses = std::collections::BTreeSet::new();
    let fx = support::fixtures().unwrap();
    let genesis: Value =
        serde_json::from_str(&std::fs::read_to_string(fx.join("genesis.json")).unwrap()).unwrap();
    for a in genesis["alloc"].as_object().unwrap().keys() {
        addresses.insert(format!("0x{}", a.trim_start_matches("0x").to_lowercase()));
    }
    for n in 0..=head {
        let b = node.call("eth_getBlockByNumber", json!([format!("{n:#x}"), true])).unwrap();
        addresses.insert(b["miner"].as_str().unwrap().to_string());
        for tx in b["transactions"].as_array().unwrap() {
            for field in ["from", "to"] {
                if let Some(a) = tx[field].as_str() {
                    addresses.insert(a.to_string());
                }
            }
        }
        for r in node
            .call("eth_getBlockReceipts", json!([format!("{n:#x}")]))
            .unwrap()
            .as_array()
            .unwrap()
        {
            if let Some(a) = r["contractAddress"].as_str() {
                addresses.insert(a.to_string());
            }
        }
    }
    let slots: Vec<String> = (0..4u8).map(|i| format!("{i:#066x}")).collect();
    let latest = format!("{head:#x}");
    let contracts: std::collections::BTreeSet<String> = addresses
        .iter()
        .filter(|a| node.call("eth_getCode", json!([a, latest])).unwrap() != json!("0x"))
        .cloned()
        .collect();
    for n in 0..=head {
        let at = format!("{n:#x}");
        call("eth_getBlockByNumber", json!([at, true]));
        call("eth_getBlockReceipts", json!([at]));
        if n > 0 {
            call("trace_block", json!([at]));
            call("trace_replayBlockTransactions", json!([at, ["trace", "stateDiff"]]));
        }
        for a in &addresses {
            call("eth_getBalance", json!([a, at]));
            call("eth_getTransactionCount", json!([a, at]));
            call("eth_getCode", json!([a, at]));
            // Storage and proofs of the contracts, and of a few others (the proof of an account
            // without storage differs only in its account leaf).
            if contracts.contains(a) || a.ends_with('0') {
                call("eth_getProof", json!([a, slots, at]));
                for s in &slots {
                    call("eth_getStorageAt", json!([a, s, at]));
                }
            }
        }
    }
    call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": format!("{head:#x}")}]));
    call("trace_filter", json!([{"fromBlock": "0x0", "toBlock": format!("{head:#x}")}]));
    // By address: these read the trace-address index, frozen with the blocks. Over the whole
    // chain and over a middle range (whose ends fall inside frozen files), from and to.
    let (third, two_thirds) = (format!("{:#x}", head / 3), format!("{:#x}", 2 * head / 3));
    // (A few addresses: each call replays every block that touched one.)
    for a in contracts.iter().take(3).chain(addresses.iter().take(3)) {
        for field in ["fromAddress", "toAddress"] {
            call("trace_filter", json!([{"fromBlock": "0x0", "toBlock": latest, field: [a]}]));
        }
        call(
            "trace_filter",
            json!([{"fromBlock": third, "toBlock": two_thirds, "fromAddress": [a]}]),
        );
    }
    out
}

fn assert_same(a: &[(String, Value)], b: &[(String, Value)], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: as many answers");
    for ((qa, va), (qb, vb)) in a.iter().zip(b) {
        assert_eq!(qa, qb);
        assert_eq!(va, vb, "{what}: {qa}");
    }
}

#[test]
fn every_read_at_every_block_is_the_same_with_history_frozen_and_merged() {
    let dir = tempfile::tempdir().unwrap();
    let Some((plain, spec)) = import(&dir.path().join("plain"), None) else { return };
    let (frozen, _) = import(&dir.path().join("frozen"), Some(4)).unwrap();
    let head = plain.begin_read().unwrap().head().unwrap().unwrap();
    assert!(manifest(&plain).files.is_empty(), "nothing frozen within the default window");
    let m = manifest(&frozen);
    // The window keeps the newest 4 blocks: every epoch below the floor's is frozen.
    assert_eq!(m.frozen_to as u64, (head - 4 + 1) / 4, "{m:?}");
    assert!(m.files.iter().any(|e| e.last - e.first + 1 >= 8), "some segments were merged: {m:?}");
    for e in &m.files {
        assert!(frozen.path().parent().unwrap().join("segments").join(e.file_name()).is_file());
    }
    // No history row of a frozen epoch is left in the B-tree.
    {
        let w = frozen.begin_write().unwrap();
        let t = w.transaction().open_table(loupe::storage::tables::STORAGE_TRIE_HISTORY).unwrap();
        use redb::ReadableTable;
        let first = t.iter().unwrap().next().map(|r| row_epoch(r.unwrap().0.value()));
        if let Some(first) = first {
            assert!(first >= m.frozen_to);
        }
        // Nor a trace-index row of a frozen block; and the index's files were merged too.
        let t = w.transaction().open_table(loupe::storage::tables::TRACE_ADDRESSES).unwrap();
        let frozen_blocks = u64::from(m.trace_frozen_to) * 4;
        assert_eq!(m.trace_frozen_to, m.blocks_frozen_to);
        for row in t.iter().unwrap() {
            let key = *row.unwrap().0.value();
            let block = u64::from_be_bytes(key[20..].try_into().unwrap());
            assert!(block >= frozen_blocks, "block {block} is frozen, its trace row is not");
        }
        let trace = |e: &&loupe::storage::segments::Entry| {
            e.kind == loupe::storage::segments::Kind::TraceAddresses
        };
        assert!(m.files.iter().filter(trace).any(|e| e.last - e.first + 1 >= 8), "{m:?}");
    }
    loupe::trie::verify(&frozen.begin_read().unwrap()).unwrap();
    let rows = loupe::trie::verify_history(&frozen.begin_read().unwrap()).unwrap();
    assert!(rows > 0);

    let a = answers(&support::Node::serve(plain.clone(), spec.clone(), |_| {}), head);
    let b = answers(&support::Node::serve(frozen.clone(), spec.clone(), |_| {}), head);
    assert_same(&a, &b, "frozen at import");

    // Groups of 13 blocks, each moving the head past three epochs: a commit freezes them at
    // once, into one file of each kind of block data.
    let (wide, _) = import_in_groups(
        &dir.path().join("wide"),
        Some(4),
        loupe::storage::segments::ProofHistory::All,
        StateRootCheck::Block,
        13,
    )
    .unwrap();
    let w = manifest(&wide);
    assert_eq!(w.frozen_to as u64, (head - 4 + 1) / 4, "{w:?}");
    let headers =
        |e: &&loupe::storage::segments::Entry| e.kind == loupe::storage::segments::Kind::Headers;
    // Each commit froze at least two epochs' headers; freezing at each head move left the
    // newest epochs in a file each until a merge took them.
    assert!(w.files.iter().filter(headers).all(|e| e.last > e.first), "{w:?}");
    assert!(m.files.iter().filter(headers).any(|e| e.last == e.first), "{m:?}");
    loupe::trie::verify(&wide.begin_read().unwrap()).unwrap();
    loupe::trie::verify_history(&wide.begin_read().unwrap()).unwrap();
    let e = answers(&support::Node::serve(wide, spec.clone(), |_| {}), head);
    assert_same(&a, &e, "frozen at the commits of groups of three epochs");

    // The same datadir, before and after its window is narrowed.
    let w = plain.begin_write().unwrap();
    w.set_unwind_depth(2).unwrap();
    w.commit(true).unwrap();
    assert!(!manifest(&plain).files.is_empty());
    let c = answers(&support::Node::serve(plain.clone(), spec.clone(), |_| {}), head);
    assert_same(&a, &c, "frozen in place");
    loupe::trie::verify_history(&plain.begin_read().unwrap()).unwrap();

    // A copy carries the segments; it reopens, verifies and answers the same.
    let copy = dir.path().join("copy");
    frozen.copy_to(&copy).unwrap();
    drop(frozen);
    let copied = Arc::new(Database::open(&copy).unwrap());
    loupe::trie::verify_history(&copied.begin_read().unwrap()).unwrap();
    let d = answers(&support::Node::serve(copied, spec, |_| {}), head);
    assert_same(&a, &d, "a copy");
}

/// A segment file the manifest does not name (a freeze whose commit never happened) is removed
/// on open; one it names that is damaged is refused by name.
#[test]
fn files_outside_the_manifest_are_removed_and_a_damaged_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let Some((db, _)) = import(&path, Some(4)) else { return };
    let m = manifest(&db);
    drop(db);
    let segments = path.join("segments");
    std::fs::write(segments.join("account-history-00009999-00009999.seg"), b"junk").unwrap();
    std::fs::write(segments.join("storage-history-00000000-00000001.tmp"), b"junk").unwrap();
    let db = Database::open(&path).unwrap();
    let left: Vec<_> =
        std::fs::read_dir(&segments).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), m.files.len(), "{left:?}");
    drop(db);
    let victim = segments.join(m.files[0].file_name());
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() - 1]).unwrap();
    let err = Database::open(&path).unwrap_err().to_string();
    assert!(err.contains(&m.files[0].file_name()), "{err}");
}

/// Snapshots and write transactions reuse the last decoded manifest while the stored one is
/// the same (`Store::view_stored`): imported block by block with epochs of 4 and a window of 4,
/// where freezes and merges change the manifest every few blocks, every block's ancestry checks
/// read frozen headers through the writer's view, and after every block a new snapshot reads
/// exactly the files its manifest names, frozen to its epochs (`Reader::check_segments`).
#[test]
fn every_snapshot_reads_the_segments_of_its_own_manifest_as_freezes_and_merges_change_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some((db, spec, fx)) = init(dir.path(), Some(4), None) else { return };
    let file = std::fs::File::open(fx.join("chain.rlp")).unwrap();
    let mut blocks = loupe::import::BlockReader::new(std::io::BufReader::new(file));
    let (mut manifests, mut last) = (0, manifest(&db));
    while let Some(next) = blocks.next_block() {
        let (_, block) = next.unwrap();
        loupe::import::import_block(&db, &spec, &block, false).unwrap();
        let files = db.begin_read().unwrap().check_segments().unwrap();
        let now = manifest(&db);
        assert_eq!(files, now.files.len() as u64);
        if now != last {
            manifests += 1;
            last = now;
        }
    }
    assert!(last.frozen_to > 0 && last.blocks_frozen_to > 0, "nothing frozen: {last:?}");
    assert!(manifests >= 4, "the manifest changed {manifests} times");
}

/// `loupe import` killed with SIGKILL at pseudo-random moments while it writes and merges
/// segment files (epochs of 2 blocks, a window of 2, a pause in the middle of each file so that
/// the kills land there): after each kill the datadir opens, `verify` and `verify --history`
/// pass, and no file outside the manifest is left; a last run finishes the import.
#[test]
fn sigkill_while_segments_are_written_and_merged_leaves_a_verifiable_datadir() {
    let Some(fx) = support::fixtures() else { return };
    let dir = tempfile::tempdir().unwrap();
    let datadir = dir.path().join("data");
    let log = dir.path().join("import.log");
    let run = |pause: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_loupe"))
            .args(["import", "--datadir"])
            .arg(&datadir)
            .arg("--chain")
            .arg(fx.join("genesis.json"))
            .arg(fx.join("chain.rlp"))
            .args(["--import.batch", "2"])
            .env("LOUPE_HISTORY_EPOCH", "2")
            .env("LOUPE_UNWIND_DEPTH", "2")
            .env(loupe::storage::segments::file::TEST_PAUSE_ENV, pause)
            .env("RUST_LOG", "storage=debug,import=debug")
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap()
    };
    let mut landed = 0;
    let mut last_head = 0;
    for i in 0..60u64 {
        if landed >= 20 {
            break;
        }
        let mut child = run("150");
        // Wait for this run's first segment (start-up and the blocks before it take longer on a
        // loaded machine), then kill at a random moment among the pauses in each segment.
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60)
            && !std::fs::read_to_string(&log).unwrap_or_default().contains("segment written")
            && child.try_wait().ok().flatten().is_none()
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let delay = splitmix64(i) % 1500;
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // Killed in a segment: the last storage line is a file written but not yet committed.
        let last = text
            .lines()
            .rev()
            .find(|l| l.contains("segment written") || l.contains("froze history"));
        if last.is_some_and(|l| l.contains("segment written")) {
            landed += 1;
        }
        let db = Database::open(&datadir)
            .unwrap_or_else(|e| panic!("iteration {i}: does not open after SIGKILL: {e}"));
        let Some(head) = db.begin_read().unwrap().head().unwrap() else { continue };
        assert!(head >= last_head, "iteration {i}: the head went back from {last_head} to {head}");
        last_head = head;
        loupe::trie::verify(&db.begin_read().unwrap())
            .unwrap_or_else(|e| panic!("iteration {i}: verify after SIGKILL: {e}"));
        loupe::trie::verify_history(&db.begin_read().unwrap())
            .unwrap_or_else(|e| panic!("iteration {i}: verify --history after SIGKILL: {e}"));
        let named: std::collections::BTreeSet<String> =
            manifest(&db).files.iter().map(|e| e.file_name()).collect();
        let present: std::collections::BTreeSet<String> =
            std::fs::read_dir(datadir.join("segments"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
        assert_eq!(named, present, "iteration {i}: the folder holds exactly the manifest's files");
    }
    assert!(
        landed >= 20,
        "only {landed} kills landed while a segment was being written; the last run's log: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let status = run("0").wait().unwrap();
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let db = Database::open(&datadir).unwrap();
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(54));
    loupe::trie::verify_history(&db.begin_read().unwrap()).unwrap();
    assert!(!manifest(&db).files.is_empty());
}

/// A datadir that keeps trie history for the unwind window only: no trie-history segments, a
/// proof below the window is an error naming the choice, a proof inside it verifies against its
/// header, and every other read equals the datadir that keeps it all.
#[test]
fn without_trie_history_proofs_below_the_window_name_the_choice() {
    let dir = tempfile::tempdir().unwrap();
    let Some((all, spec)) = import(&dir.path().join("all"), Some(4)) else { return };
    let (window, _) = import_keeping(
        &dir.path().join("window"),
        Some(4),
        loupe::storage::segments::ProofHistory::Window,
        StateRootCheck::Block,
    )
    .unwrap();
    let head = window.begin_read().unwrap().head().unwrap().unwrap();
    let m = manifest(&window);
    use loupe::storage::segments::Kind;
    assert!(
        m.files
            .iter()
            .all(|e| !matches!(e.kind, Kind::AccountTrieHistory | Kind::StorageTrieHistory)),
        "{m:?}"
    );
    assert!(m.files.iter().any(|e| e.kind == Kind::StorageHistory), "{m:?}");
    loupe::trie::verify_history(&window.begin_read().unwrap()).unwrap();
    let from = u64::from(m.frozen_to) * 4;
    let node = support::Node::serve(window, spec.clone(), |_| {});
    let address = "0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2";
    let err =
        node.call("eth_getProof", json!([address, [], format!("{:#x}", from - 1)])).unwrap_err();
    assert_eq!(err["code"], json!(-32000), "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("--proof-history window")
            && message.contains(&format!("from block {from}")),
        "{message}"
    );
    for n in from..=head {
        assert_proof_verifies(&node, address, n);
    }
    // An execution witness needs proofs at the parent: refused below the window, naming the
    // setting; inside it, the same witness as the datadir that keeps it all.
    let err = node.call("debug_executionWitness", json!([format!("{from:#x}")])).unwrap_err();
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("--proof-history window"), "{message}");
    let full = support::Node::serve(all.clone(), spec.clone(), |_| {});
    for n in from + 1..=head {
        let b = json!([format!("{n:#x}")]);
        assert_eq!(
            node.call("debug_executionWitness", b.clone()).unwrap(),
            full.call("debug_executionWitness", b).unwrap(),
            "block {n}"
        );
    }
    drop(full);
    // Everything else reads as in the datadir that keeps it all (proofs left out).
    let strip = |v: Vec<(String, Value)>| -> Vec<(String, Value)> {
        v.into_iter().filter(|(q, _)| !q.starts_with("eth_getProof")).collect()
    };
    let a = strip(answers(&support::Node::serve(all, spec, |_| {}), head));
    let b = strip(answers(&node, head));
    assert_same(&a, &b, "without trie history");
}

/// Checks an `eth_getProof` answer of `address` at block `n` against that block's state root.
fn assert_proof_verifies(node: &support::Node, address: &str, n: u64) {
    let proof = node.call("eth_getProof", json!([address, [], format!("{n:#x}")])).unwrap();
    let root: alloy_primitives::B256 =
        node.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).unwrap()["stateRoot"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    let nodes: Vec<alloy_primitives::Bytes> =
        serde_json::from_value(proof["accountProof"].clone()).unwrap();
    let key = alloy_trie::Nibbles::unpack(alloy_primitives::keccak256(
        address.parse::<alloy_primitives::Address>().unwrap(),
    ));
    let account = alloy_trie::TrieAccount {
        nonce: u64::from_str_radix(proof["nonce"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap(),
        balance: proof["balance"].as_str().unwrap().parse().unwrap(),
        storage_root: proof["storageHash"].as_str().unwrap().parse().unwrap(),
        code_hash: proof["codeHash"].as_str().unwrap().parse().unwrap(),
    };
    alloy_trie::proof::verify_proof(root, key, Some(alloy_rlp::encode(account)), &nodes).unwrap();
}

/// A bulk import that checks the state root once per commit group (the default in a datadir
/// without trie history): every read but the proofs equals the datadir that checked and kept
/// every block's trie, the head's trie verifies against its header and proves, a proof inside
/// the last group names the choice, and unwinding into it is refused rather than wrong.
#[test]
fn group_state_roots_store_the_same_chain_and_keep_proofs_from_the_last_group() {
    let dir = tempfile::tempdir().unwrap();
    let Some((all, spec)) = import(&dir.path().join("all"), Some(4)) else { return };
    let (grouped, _) = import_keeping(
        &dir.path().join("grouped"),
        Some(4),
        loupe::storage::segments::ProofHistory::Window,
        StateRootCheck::Auto,
    )
    .unwrap();
    let reader = grouped.begin_read().unwrap();
    let head = reader.head().unwrap().unwrap();
    // The last group ends at the head: its root was checked there, once for the group.
    assert_eq!(reader.group_root_at().unwrap(), Some(head));
    assert_eq!(all.begin_read().unwrap().group_root_at().unwrap(), None);
    // The stored trie is the head's, rebuilt from the state and checked against its header.
    loupe::trie::verify(&reader).unwrap();
    loupe::trie::verify_history(&reader).unwrap();
    drop(reader);
    // Unwinding a block whose trie was settled for a group is refused and changes nothing.
    let mut w = grouped.begin_write().unwrap();
    let err = w.unwind_head().unwrap_err().to_string();
    assert!(err.contains("--state-root group") && err.contains(&format!("block {head}")), "{err}");
    drop(w);
    assert_eq!(grouped.begin_read().unwrap().head().unwrap(), Some(head));

    let node = support::Node::serve(grouped, spec.clone(), |_| {});
    let address = "0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2";
    assert_proof_verifies(&node, address, head);
    let err =
        node.call("eth_getProof", json!([address, [], format!("{:#x}", head - 1)])).unwrap_err();
    assert_eq!(err["code"], json!(-32000), "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("--state-root group") && message.contains(&format!("from block {head}")),
        "{message}"
    );
    let strip = |v: Vec<(String, Value)>| -> Vec<(String, Value)> {
        v.into_iter().filter(|(q, _)| !q.starts_with("eth_getProof")).collect()
    };
    let a = strip(answers(&support::Node::serve(all, spec, |_| {}), head));
    let b = strip(answers(&node, head));
    assert_same(&a, &b, "state roots per group");
}

/// An import into a datadir that keeps trie history at every block, checking roots per group,
/// leaves its segments merged as an import of the blocks alone does: the stage after the blocks
/// freezes the epochs it completes and starts their merges on a thread of their own, and the
/// import settles them before it returns. No run of `MERGE_FAN_IN` (8) files of one kind and one
/// level, which a later commit would merge, is left. The blocks are imported first with the
/// stage left for later, then the same file again (every block already stored), so the stage
/// runs after them alone; with a window of 20 blocks its range of epoch 7 (of 4 blocks) freezes
/// the eighth epoch of the state and trie history, and the ranges after it freeze nothing.
#[test]
fn a_staged_import_leaves_its_segments_merged() {
    let dir = tempfile::tempdir().unwrap();
    let all = Some(loupe::storage::segments::ProofHistory::All);
    let Some((db, spec, fx)) = init(dir.path(), Some(20), all) else { return };
    let file = [fx.join("chain.rlp")];
    let options = |trie_history| ImportOptions { batch: 3, trie_history, ..Default::default() };
    import_files_with(&db, &spec, &file, options(false)).unwrap();
    assert!(db.begin_read().unwrap().trie_stage().unwrap().unwrap().pending());
    let again = import_files_with(&db, &spec, &file, options(true)).unwrap();
    assert_eq!(again.imported, 0);
    let stage = db.begin_read().unwrap().trie_stage().unwrap().expect("a grouped import");
    assert!(!stage.pending() && stage.staged_to > 0, "{stage:?}");
    let m = manifest(&db);
    let level = |e: &loupe::storage::segments::Entry| {
        let (mut span, mut level) = (e.last - e.first + 1, 0);
        while span >= 8 {
            span /= 8;
            level += 1;
        }
        level
    };
    // The account trie changes at every block: it has a file for each epoch frozen, merged.
    let trie = |e: &&loupe::storage::segments::Entry| {
        e.kind == loupe::storage::segments::Kind::AccountTrieHistory
    };
    // Frozen below the first block that can still be unwound: past the unwind window (20
    // blocks) and past the last group's root, where unwinding stops.
    let r = db.begin_read().unwrap();
    let (head, grouped) = (r.head().unwrap().unwrap(), r.group_root_at().unwrap().unwrap());
    let floor = (head + 1 - 20).max(grouped + 1);
    assert_eq!(u64::from(m.frozen_to), ((floor - 1) / 4).min(head / 4), "{m:?}");
    assert!(m.frozen_to > (head - 20) as u32 / 4, "grouped blocks wait for no window: {m:?}");
    for kind in loupe::storage::segments::Kind::ALL {
        let files: Vec<_> = m.files.iter().filter(|e| e.kind == kind).collect();
        for run in files.windows(8) {
            assert!(
                run.iter().any(|e| level(e) != level(run[0])),
                "{}: a merge left due: {run:?}",
                kind.name()
            );
        }
    }
    assert!(m.files.iter().filter(trie).any(|e| e.last - e.first + 1 >= 8), "{m:?}");
}
