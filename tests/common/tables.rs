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
        ACCESS_LISTS,
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
    fold_segments(dir, &txn, &mut out);
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

/// The bytes of a dumped key or value (`[1, 2, 3]`, as `{:?}` prints bytes).
pub fn debug_bytes(text: &str) -> Vec<u8> {
    text.trim_matches(|c| c == '[' || c == ']')
        .split(", ")
        .filter(|b| !b.is_empty())
        .map(|b| b.parse().expect("a byte"))
        .collect()
}

/// Puts the rows of `dir`'s frozen segments back among the rows of the tables they were taken
/// from, in key order, and drops the manifest: a datadir compares equal to one that froze
/// less, or later, when it holds the same rows. Receipts and access list rows are compared in
/// the form a segment keeps them (their zstd frame undone).
fn fold_segments(dir: &Path, txn: &redb::ReadTransaction, out: &mut Tables) {
    use loupe::storage::segments::freeze::segment_value;
    use loupe::storage::segments::{Kind, Manifest, Segment};
    use loupe::storage::tables;
    let meta = txn.open_table(tables::META).expect("reading the database");
    let manifest = Manifest::read(&meta).expect("reading the segment manifest");
    drop(meta);
    let meta_name = tables::META.name().to_string();
    if let Some(rows) = out.get_mut(&meta_name) {
        rows.retain(|(k, _)| k != &format!("{:?}", tables::meta::SEGMENTS));
    }
    let table_of = |kind: Kind| -> String {
        match kind {
            Kind::AccountHistory => tables::HASHED_ACCOUNT_HISTORY.name(),
            Kind::StorageHistory => tables::HASHED_STORAGE_HISTORY.name(),
            Kind::AccountTrieHistory => tables::ACCOUNT_TRIE_HISTORY.name(),
            Kind::StorageTrieHistory => tables::STORAGE_TRIE_HISTORY.name(),
            Kind::Headers => tables::HEADERS.name(),
            Kind::Canonical => tables::CANONICAL.name(),
            Kind::Bodies => tables::BODIES.name(),
            Kind::Transactions => tables::TRANSACTIONS.name(),
            Kind::Receipts => tables::RECEIPTS.name(),
            Kind::AccessLists => tables::ACCESS_LISTS.name(),
            Kind::TraceAddresses => tables::TRACE_ADDRESSES.name(),
        }
        .to_string()
    };
    // Tables keyed by a block number print it as one; the others print their key bytes.
    let by_number = |kind: Kind| {
        matches!(
            kind,
            Kind::Headers | Kind::Canonical | Kind::Bodies | Kind::Receipts | Kind::AccessLists
        )
    };
    let key_text = |kind: Kind, key: &[u8]| -> String {
        if by_number(kind) {
            u64::from_be_bytes(key.try_into().expect("an 8-byte block key")).to_string()
        } else {
            format!("{key:?}")
        }
    };
    for kind in [Kind::Receipts, Kind::AccessLists] {
        if let Some(rows) = out.get_mut(&table_of(kind)) {
            for (_, v) in rows.iter_mut() {
                let bytes = debug_bytes(v);
                let plain = segment_value(kind, &bytes).expect("a receipts or access list row");
                *v = format!("{:?}", plain.as_ref());
            }
        }
    }
    for kind in Kind::ALL {
        let mut frozen = Vec::new();
        for (i, entry) in manifest.of(kind).enumerate() {
            let path = dir.join(loupe::storage::segments::SEGMENTS_DIR).join(entry.file_name());
            let segment = Segment::open(&path, i as u64 + 1).expect("opening a segment");
            for b in 0..segment.block_count() {
                let block = segment.read_block(b).expect("reading a segment block");
                for r in 0..block.len() {
                    let (k, v) = block.row(r);
                    // A trie-history file keeps a node's rows together: the table's key back.
                    let k = if kind.is_entity_first() {
                        loupe::storage::history::keys::table_key_of_entity_first(k)
                    } else {
                        k.to_vec()
                    };
                    let k = k.as_slice();
                    // The index's values are `()` in the table and empty in a segment.
                    let v = if kind == Kind::TraceAddresses && v.is_empty() {
                        "()".to_string()
                    } else {
                        format!("{v:?}")
                    };
                    frozen.push((k.to_vec(), (key_text(kind, k), v)));
                }
            }
        }
        if frozen.is_empty() {
            continue;
        }
        let rows = out.entry(table_of(kind)).or_default();
        let mut all: Vec<(Vec<u8>, (String, String))> = frozen;
        for row in rows.drain(..) {
            let raw = if by_number(kind) {
                row.0.parse::<u64>().expect("a block number").to_be_bytes().to_vec()
            } else {
                debug_bytes(&row.0)
            };
            all.push((raw, row));
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        *rows = all.into_iter().map(|(_, row)| row).collect();
    }
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
