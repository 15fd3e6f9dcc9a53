//! Header validity against the parent, through `import_block_pending` on the dev chain's last
//! block: every rule execution cannot catch is refused by name.

#![allow(clippy::unwrap_used)]

mod support;

/// A change made to a valid header.
type Mutation = Box<dyn Fn(&mut alloy_consensus::Header)>;

/// Header rules execution cannot catch are checked against the parent (fuzzing found a block
/// with a proof-of-stake nonce imported): each broken rule is refused by name, and the block
/// as stored still imports.
#[test]
fn header_rules_are_checked_against_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spec, tip) = support::dev_chain(dir.path());
    let reader = db.begin_read().unwrap();
    let header = reader.header(tip).unwrap().unwrap();
    let parent = reader.header(tip - 1).unwrap().unwrap();
    let (body, _) = reader.body(tip).unwrap().unwrap();
    let txs: Vec<_> = reader.transactions(tip).unwrap().into_iter().map(|t| t.tx).collect();
    let block = |h: alloy_consensus::Header| alloy_consensus::Block {
        header: h,
        body: alloy_consensus::BlockBody { transactions: txs.clone(), ..body.clone() },
    };
    let try_import = |h: alloy_consensus::Header| {
        let mut w = db.begin_write().unwrap();
        w.unwind_head().unwrap();
        loupe::import::import_block_pending(&w, &spec, &block(h)).map_err(|e| e.to_string())
    };
    assert!(try_import(header.clone()).is_ok(), "the stored block imports");
    let cases: Vec<(&str, Mutation)> = vec![
        ("nonce", Box::new(|h| h.nonce = alloy_primitives::B64::from(1u64))),
        ("difficulty", Box::new(|h| h.difficulty = alloy_primitives::U256::from(1))),
        ("extra data is 33 bytes", Box::new(|h| h.extra_data = vec![0; 33].into())),
        ("before the parent's", Box::new(move |h| h.timestamp = parent.timestamp - 1)),
        ("gas limit", Box::new(|h| h.gas_limit += h.gas_limit / 1024)),
        ("above the gas limit", Box::new(|h| h.gas_used = h.gas_limit + 1)),
        // Fuzzing found this one too: the blob base fee was taken from the header unchecked.
        ("excess blob gas", Box::new(|h| h.excess_blob_gas = Some(20))),
    ];
    for (rule, mutate) in cases {
        let mut h = header.clone();
        mutate(&mut h);
        let err = try_import(h).unwrap_err();
        assert!(err.contains("invalid header") && err.contains(rule), "{rule}: {err}");
    }
    assert_eq!(db.begin_read().unwrap().head().unwrap(), Some(tip));
}
