//! Table-by-table comparison of two databases: the truth of tests whose second path to an
//! answer is another way of storing the same blocks (unwinding, import groups, compaction).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, TableHandle};

/// Every row of every table, as debug text, by table name. Bytecodes and preimages are content
/// addressed and never deleted, so they are returned apart.
pub type Tables = BTreeMap<String, Vec<(String, String)>>;

/// Every table of the database in `dir`, row by row, and the content-addressed rows apart.
pub fn dump_tables(dir: &Path) -> (Tables, Vec<String>) {
    let db = redb::Database::open(dir.join(loupe::storage::DB_FILE)).expect("reading the database");
    let txn = db.begin_read().expect("reading the database");
    let mut out = Tables::new();
    macro_rules! dump {
        ($($t:ident),* $(,)?) => {$(
            let t = txn.open_table(loupe::storage::tables::$t).expect("reading the database");
            let rows = t
                .iter()
                .expect("reading the database")
                .map(|r| {
                    let (k, v) = r.expect("reading the database");
                    (format!("{:?}", k.value()), format!("{:?}", v.value()))
                })
                .collect();
            out.insert(loupe::storage::tables::$t.name().to_string(), rows);
        )*};
    }
    dump!(
        HEADERS,
        CANONICAL,
        HASH_TO_NUMBER,
        BODIES,
        TRANSACTIONS,
        RECEIPTS,
        TX_LOOKUP,
        HASHED_ACCOUNTS,
        HASHED_STORAGE,
        HASHED_ACCOUNT_HISTORY,
        HASHED_STORAGE_HISTORY,
        HASHED_ACCOUNT_EPOCHS,
        HASHED_STORAGE_EPOCHS,
        ACCOUNT_TRIE,
        STORAGE_TRIE,
        ACCOUNT_TRIE_HISTORY,
        STORAGE_TRIE_HISTORY,
        ACCOUNT_TRIE_EPOCHS,
        STORAGE_TRIE_EPOCHS,
        BLOCK_CHANGES,
        TRACE_ADDRESSES,
        META,
    );
    let codes = txn.open_table(loupe::storage::tables::BYTECODES).expect("reading the database");
    let mut codes: Vec<String> = codes
        .iter()
        .expect("reading the database")
        .map(|r| format!("{:?}", r.expect("reading the database").0.value()))
        .collect();
    let preimages =
        txn.open_table(loupe::storage::tables::PREIMAGES).expect("reading the database");
    codes.extend(preimages.iter().expect("reading the database").map(|r| {
        let (k, v) = r.expect("reading the database");
        format!("{:?} {:?}", k.value(), v.value())
    }));
    // The list above must cover every table the database has.
    for handle in txn.list_tables().expect("reading the database") {
        let name = handle.name().to_string();
        assert!(
            out.contains_key(&name)
                || name == loupe::storage::tables::BYTECODES.name()
                || name == loupe::storage::tables::PREIMAGES.name(),
            "table {name} is not compared"
        );
    }
    (out, codes)
}

/// Asserts that the databases in `a` and `b` hold the same rows in every table (bytecodes and
/// preimages of `b` must all be in `a`), naming the first table that differs and a few of the
/// rows found in only one of them.
pub fn assert_same_tables(first: &Path, second: &Path, what: &str) {
    let (a, codes_a) = dump_tables(first);
    let (b, codes_b) = dump_tables(second);
    for (name, rows_b) in &b {
        let rows_a = &a[name];
        if rows_a != rows_b {
            let only_a: Vec<_> = rows_a.iter().filter(|r| !rows_b.contains(r)).take(3).collect();
            let only_b: Vec<_> = rows_b.iter().filter(|r| !rows_a.contains(r)).take(3).collect();
            let short = |rows: Vec<&(String, String)>| -> String {
                format!("{rows:?}").chars().take(600).collect()
            };
            let (only_a, only_b) = (short(only_a), short(only_b));
            panic!(
                "{what}: table {name} differs ({} rows vs {}); only in the first: {only_a:?}; \
                 only in the second: {only_b:?}",
                rows_a.len(),
                rows_b.len()
            );
        }
    }
    for code in &codes_b {
        assert!(codes_a.contains(code), "{what}: bytecode or preimage {code} lost");
    }
}
