//! `loupe verify` through the real binary: it passes on the imported fixture chain and on the
//! dev chain, and a deliberately corrupted trie row is reported with its trie, path and both
//! hashes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use alloy_primitives::B256;
use common::{CHAIN_LEN, Fixture};

fn loupe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loupe")).args(args).output().expect("run loupe")
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn import_fixture(fx: &Fixture) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = loupe(&[
        "import",
        "--datadir",
        d,
        "--genesis",
        fx.genesis_path().to_str().unwrap(),
        fx.chain_path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

const ACCOUNT_TRIE: redb::TableDefinition<'_, &[u8; 33], &[u8]> =
    redb::TableDefinition::new("account_trie");
const STORAGE_TRIE: redb::TableDefinition<'_, &[u8; 65], &[u8]> =
    redb::TableDefinition::new("storage_trie");

/// Flips one byte of the first child hash of the stored row with the most hashes; returns the
/// row's path (hex nibbles) and the stored hash before the flip.
fn corrupt<const N: usize>(
    dir: &std::path::Path,
    table: redb::TableDefinition<'_, &[u8; N], &[u8]>,
) -> (String, B256) {
    use redb::ReadableTable;
    let db = redb::Database::open(dir.join("loupe.redb")).unwrap();
    let w = db.begin_write().unwrap();
    let (path, old) = {
        let mut t = w.open_table(table).unwrap();
        let (key, mut value) = t
            .iter()
            .unwrap()
            .map(|r| r.unwrap())
            .map(|(k, v)| (*k.value(), v.value().to_vec()))
            .max_by_key(|(_, v)| v.len())
            .expect("a stored trie node");
        assert!(value.len() >= 38, "the row has a child hash");
        let old = B256::from_slice(&value[6..38]);
        value[6] ^= 0xff;
        t.insert(&key, value.as_slice()).unwrap();
        let p = &key[N - 33..];
        let len = p[32] as usize;
        let nibbles: String = (0..len)
            .map(|i| {
                let b = p[i / 2];
                let n = if i % 2 == 0 { b >> 4 } else { b & 0xf };
                char::from_digit(u32::from(n), 16).unwrap()
            })
            .collect();
        (nibbles, old)
    };
    w.commit().unwrap();
    (path, old)
}

#[test]
fn verify_passes_on_the_fixture_chain_and_names_a_corrupted_node() {
    let Some(fx) = Fixture::load() else { return };
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();
    let out = loupe(&["verify", "--datadir", d]);
    let root = fx.block(CHAIN_LEN).block.header.state_root;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("head #{CHAIN_LEN}")), "{}", text(&out));
    assert!(text(&out).contains(&root.to_string()), "{}", text(&out));

    // An account-trie row with a damaged child hash.
    let (path, old) = corrupt(dir.path(), ACCOUNT_TRIE);
    let out = loupe(&["verify", "--datadir", d]);
    let msg = text(&out);
    assert!(!out.status.success(), "verify passed on a corrupted database: {msg}");
    assert!(msg.contains("account trie path 0x"), "{msg}");
    assert!(msg.contains(&format!("path 0x{path}")), "names the row's path {path}: {msg}");
    assert!(msg.contains(&old.to_string()), "names the rebuilt hash {old}: {msg}");
    let mut flipped = old;
    flipped.0[0] ^= 0xff;
    assert!(msg.contains(&flipped.to_string()), "names the stored hash: {msg}");
}

#[test]
fn verify_names_a_corrupted_storage_trie_node() {
    let Some(fx) = Fixture::load() else { return };
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();
    let (path, old) = corrupt(dir.path(), STORAGE_TRIE);
    let out = loupe(&["verify", "--datadir", d]);
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("storage trie of hashed account 0x"), "{msg}");
    assert!(msg.contains(&format!("path 0x{path}")), "{msg}");
    assert!(msg.contains(&old.to_string()), "{msg}");
}

#[test]
fn verify_passes_on_the_dev_chain() {
    let dir = tempfile::tempdir().unwrap();
    let db = loupe::storage::Database::open(dir.path()).unwrap();
    let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
    let built = loupe::dev::build_sample_history(&db, &spec).unwrap();
    assert_eq!(built, loupe::dev::HISTORY_BLOCKS);
    let head_root = db.begin_read().unwrap().header(built).unwrap().unwrap().state_root;
    drop(db);
    let out = loupe(&["verify", "--datadir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&head_root.to_string()), "{}", text(&out));
}

#[test]
fn verify_names_a_wrong_address_or_a_missing_slot_preimage() {
    use redb::ReadableTable;
    const PREIMAGES: redb::TableDefinition<'_, &[u8; 32], &[u8]> =
        redb::TableDefinition::new("preimages");
    const HASHED_ACCOUNTS: redb::TableDefinition<'_, &[u8; 32], &[u8]> =
        redb::TableDefinition::new("hashed_accounts");
    let Some(fx) = Fixture::load() else { return };
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();

    // An account row whose address (bytes 1..21, after the flags) no longer hashes to its key.
    edit(dir.path(), |w| {
        let mut t = w.open_table(HASHED_ACCOUNTS).unwrap();
        let (key, mut row) =
            t.first().unwrap().map(|(k, v)| (*k.value(), v.value().to_vec())).expect("an account");
        row[20] ^= 1;
        t.insert(&key, row.as_slice()).unwrap();
    });
    let msg = verify_fails(d, "a wrong address");
    assert!(msg.contains("account address"), "{msg}");

    // Fresh import; then a slot preimage removed.
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();
    let hash = edit(dir.path(), |w| {
        let mut t = w.open_table(PREIMAGES).unwrap();
        let key = t.first().unwrap().map(|(k, _)| *k.value()).expect("a slot preimage");
        t.remove(&key).unwrap();
        B256::from(key)
    });
    let msg = verify_fails(d, "a missing preimage");
    assert!(msg.contains("preimage") && msg.contains(&hash.to_string()), "{msg}");

    // Fresh import; then an account row cut short by one byte: named with its key.
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();
    let key = edit(dir.path(), |w| {
        let mut t = w.open_table(HASHED_ACCOUNTS).unwrap();
        let (key, row) =
            t.last().unwrap().map(|(k, v)| (*k.value(), v.value().to_vec())).expect("an account");
        t.insert(&key, &row[..row.len() - 1]).unwrap();
        B256::from(key)
    });
    let msg = verify_fails(d, "a short account row");
    assert!(msg.contains("hashed_accounts") && msg.contains(&key.to_string()), "{msg}");
}

/// Runs `f` in one committed write transaction on the datadir's database file.
fn edit<T>(dir: &std::path::Path, f: impl FnOnce(&redb::WriteTransaction) -> T) -> T {
    let db = redb::Database::open(dir.join("loupe.redb")).unwrap();
    let w = db.begin_write().unwrap();
    let out = f(&w);
    w.commit().unwrap();
    out
}

/// `loupe verify` on datadir `d`, which must fail (`what` says what was broken); its output.
fn verify_fails(d: &str, what: &str) -> String {
    let out = loupe(&["verify", "--datadir", d]);
    let msg = text(&out);
    assert!(!out.status.success(), "verify passed with {what}: {msg}");
    msg
}

/// Trie-node history rows are resolved by `verify --history`: on the fixture chain every row
/// resolves, and a delta row whose run breaks the count (a whole row is due at least every
/// `FULL_ROW_EVERY` rows) is named with its table and key.
#[test]
fn verify_resolves_trie_history_and_names_a_broken_delta_run() {
    use loupe::storage::tables::ACCOUNT_TRIE_HISTORY as HISTORY;
    use redb::ReadableTable;
    let Some(fx) = Fixture::load() else { return };
    let dir = import_fixture(&fx);
    let d = dir.path().to_str().unwrap();
    let out = loupe(&["verify", "--history", "--datadir", d]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: u64 = text(&out)
        .split(" trie-history rows")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no history count in {}", text(&out)));
    assert!(rows > CHAIN_LEN, "only {rows} trie-history rows checked");

    // A delta row (9 + 32m bytes, run first) of the account trie's root, its run made 40.
    let key = {
        let db = redb::Database::open(dir.path().join("loupe.redb")).unwrap();
        let w = db.begin_write().unwrap();
        let key = {
            let mut t = w.open_table(HISTORY).unwrap();
            let (key, mut row) = t
                .iter()
                .unwrap()
                .map(|r| r.unwrap())
                .map(|(k, v)| (*k.value(), v.value().to_vec()))
                .find(|(_, v)| v.len() >= 9 && (v.len() - 9) % 32 == 0)
                .expect("a delta row in the account trie's history");
            row[0] = 40;
            t.insert(&key, row.as_slice()).unwrap();
            key
        };
        w.commit().unwrap();
        key
    };
    let out = loupe(&["verify", "--datadir", d]);
    assert!(out.status.success(), "history is checked only with --history: {}", text(&out));
    let out = loupe(&["verify", "--history", "--datadir", d]);
    let msg = text(&out);
    assert!(!out.status.success(), "verify passed with a broken delta run: {msg}");
    assert!(msg.contains("account_trie_history"), "{msg}");
    assert!(msg.contains(&alloy_primitives::hex::encode(key)), "names the row's key: {msg}");
    assert!(msg.contains("delta run 40"), "{msg}");
}
