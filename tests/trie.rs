//! The incremental state root on the real database, driven by revm changesets: random blocks of
//! account and slot inserts, updates and deletions, self-destructs with re-creation in the same
//! block, and emptied storage tries. The test keeps its own model of the state, applying each
//! changeset by revm's rules. After every block the stored state equals the model, the
//! incremental root equals the model's root built from scratch (and `FullRecompute` over the
//! stored state), and `loupe verify`'s check (every stored node equal to a from-scratch build,
//! cached storage roots, every preimage) passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloy_consensus::{Block, BlockBody, Header, TxEnvelope};
use alloy_primitives::{Address, B256, KECCAK256_EMPTY, U256};
use loupe::storage::codec::account::StoredAccount;
use loupe::storage::history::keys::Epochs;
use loupe::storage::{Database, FullRecompute, StateDump, Writer, state_root_of};
use loupe::trie::{RootMode, update_state_root, verify, verify_history};
use proptest::prelude::*;
use revm::database::states::{PlainStorageChangeset, StateChangeset};
use revm::state::AccountInfo;

#[derive(Debug, Clone)]
enum Op {
    /// Create or update an account.
    Touch { account: u8, nonce: u8, balance: u32 },
    /// Write slots (zero deletes).
    Write { account: u8, slots: Vec<(u16, u8)> },
    /// Delete the account and its storage.
    Destroy { account: u8 },
    /// Self-destruct and re-create in the same block, with new slots.
    Recreate { account: u8, slots: Vec<(u16, u8)> },
}

const ACCOUNTS: u8 = 200;

fn address(i: u8) -> Address {
    Address::with_last_byte(i).create(u64::from(i))
}

fn slots() -> impl Strategy<Value = Vec<(u16, u8)>> {
    // Account 0 gets a wide slot range (a deep storage trie); values 0 delete.
    prop::collection::vec((0u16..400, prop_oneof![1 => Just(0u8), 3 => 1u8..=255]), 1..20)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..ACCOUNTS, any::<u8>(), any::<u32>())
            .prop_map(|(account, nonce, balance)| Op::Touch { account, nonce, balance }),
        4 => (0..8u8, slots()).prop_map(|(account, slots)| Op::Write { account, slots }),
        1 => (0..ACCOUNTS).prop_map(|account| Op::Destroy { account }),
        1 => (0..8u8, slots()).prop_map(|(account, slots)| Op::Recreate { account, slots }),
    ]
}

/// One block's changeset, shaped as revm's `to_plain_state` shapes it: one entry per account,
/// a destroyed account with `wipe_storage`, storage written only to accounts that exist.
fn changeset(ops: &[Op], exists: &mut [bool; 256]) -> StateChangeset {
    use std::collections::BTreeMap;
    let mut accounts: BTreeMap<u8, Option<AccountInfo>> = BTreeMap::new();
    let mut storage: BTreeMap<u8, (bool, BTreeMap<U256, U256>)> = BTreeMap::new();
    let info = |nonce: u8, balance: u32| AccountInfo {
        nonce: u64::from(nonce) + 1,
        balance: U256::from(balance),
        code_hash: KECCAK256_EMPTY,
        ..Default::default()
    };
    for op in ops {
        match op {
            Op::Touch { account, nonce, balance } => {
                accounts.insert(*account, Some(info(*nonce, *balance)));
                exists[*account as usize] = true;
            }
            Op::Write { account, slots } => {
                if !exists[*account as usize] {
                    accounts.insert(*account, Some(info(0, 1)));
                    exists[*account as usize] = true;
                }
                let entry = storage.entry(*account).or_default();
                for (slot, value) in slots {
                    let slot =
                        if *account == 0 { U256::from(*slot) } else { U256::from(slot % 24) };
                    entry.1.insert(slot, U256::from(*value));
                }
            }
            Op::Destroy { account } => {
                if exists[*account as usize] {
                    accounts.insert(*account, None);
                    storage.insert(*account, (true, BTreeMap::new()));
                    exists[*account as usize] = false;
                }
            }
            Op::Recreate { account, slots } => {
                accounts.insert(*account, Some(info(0, 7)));
                exists[*account as usize] = true;
                let mut new = BTreeMap::new();
                for (slot, value) in slots {
                    new.insert(U256::from(*slot), U256::from(*value));
                }
                storage.insert(*account, (true, new));
            }
        }
    }
    StateChangeset {
        accounts: accounts.into_iter().map(|(a, i)| (address(a), i)).collect(),
        storage: storage
            .into_iter()
            .map(|(a, (wipe_storage, slots))| PlainStorageChangeset {
                address: address(a),
                wipe_storage,
                storage: slots.into_iter().collect(),
            })
            .collect(),
        contracts: Vec::new(),
    }
}

/// Applies `changes` to the model as the EVM's changeset means them: accounts first (`None`
/// deletes the account and its storage), then each account's storage (a wipe empties it; zero
/// deletes a slot).
fn apply_to_model(model: &mut StateDump, changes: &StateChangeset) {
    for (address, info) in &changes.accounts {
        match info {
            Some(i) => {
                let entry = model.entry(*address).or_default();
                entry.0 =
                    StoredAccount { nonce: i.nonce, balance: i.balance, code_hash: i.code_hash };
            }
            None => {
                model.remove(address);
            }
        }
    }
    for change in &changes.storage {
        let Some(entry) = model.get_mut(&change.address) else { continue };
        if change.wipe_storage {
            entry.1.clear();
        }
        for (slot, value) in &change.storage {
            if value.is_zero() {
                entry.1.remove(slot);
            } else {
                entry.1.insert(*slot, *value);
            }
        }
    }
}

/// Stores `changes` as block `number` with the incremental root in its own transaction, then
/// checks it against the model (which it first brings up to date) and `verify`.
fn store_block(
    db: &Database,
    model: &mut StateDump,
    number: u64,
    changes: &StateChangeset,
) -> Result<B256, TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let w = db.begin_write().map_err(|e| fail(&e))?;
    let root = store_in(&w, model, number, changes, true)?;
    w.commit(false).map_err(|e| fail(&e))?;
    check_stored(db, root)?;
    Ok(root)
}

/// `verify` on the committed database: every stored node equals a from-scratch build, the
/// root is `root`, and every trie-history row resolves.
fn check_stored(db: &Database, root: B256) -> Result<(), TestCaseError> {
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    let report = verify(&db.begin_read().map_err(|e| fail(&e))?).map_err(|e| fail(&e))?;
    prop_assert_eq!(report.root, root);
    verify_history(&db.begin_read().map_err(|e| fail(&e))?).map_err(|e| fail(&e))?;
    Ok(())
}

/// Stores `changes` as block `number` in `w`, which may hold earlier blocks not yet committed,
/// and checks the root against the model's. With `whole_state`, also the stored state against
/// the model and the root against `FullRecompute`: both list the state, which writes the trie
/// nodes the writer holds, so without it the next block's walk reads this one's nodes through
/// the held changes (`Writer::trie_nodes`).
fn store_in(
    w: &Writer,
    model: &mut StateDump,
    number: u64,
    changes: &StateChangeset,
    whole_state: bool,
) -> Result<B256, TestCaseError> {
    apply_to_model(model, changes);
    let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
    w.apply_changeset(number, changes).map_err(|e| fail(&e))?;
    // A pre-Byzantium style intermediate root first: computing must not disturb storing.
    let early = update_state_root(w, number, changes, RootMode::Compute).map_err(|e| fail(&e))?;
    let root = update_state_root(w, number, changes, RootMode::Store).map_err(|e| fail(&e))?;
    prop_assert_eq!(early, root);
    prop_assert_eq!(
        root,
        state_root_of(model),
        "incremental root differs from the model's root at block {}",
        number
    );
    if whole_state {
        let stored = w.current_state().map_err(|e| fail(&e))?;
        prop_assert_eq!(
            &stored,
            &*model,
            "stored state differs from the model at block {}",
            number
        );
        let oracle = FullRecompute.state_root(w).map_err(|e| fail(&e))?;
        prop_assert_eq!(
            root,
            oracle,
            "incremental root differs from FullRecompute at block {}",
            number
        );
    }
    let header = Header { number, state_root: root, ..Default::default() };
    let block = Block::<TxEnvelope> { header, body: BlockBody::default() };
    w.insert_block(&block, B256::with_last_byte(number as u8), &[], &[], None)
        .map_err(|e| fail(&e))?;
    w.advance_head_with_markers(number, number, number).map_err(|e| fail(&e))?;
    Ok(root)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn incremental_root_equals_full_recompute_after_every_block(
        blocks in prop::collection::vec(prop::collection::vec(op(), 1..24), 1..40),
    ) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Small history epochs: the blocks cross many epoch boundaries and indexings.
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 3 })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut exists = [false; 256];
        let mut model = StateDump::new();
        for (i, ops) in blocks.iter().enumerate() {
            let changes = changeset(ops, &mut exists);
            store_block(&db, &mut model, i as u64, &changes)?;
        }
    }

    /// Several blocks in one write transaction, as an import group stores them: each block
    /// walks the trie nodes the earlier ones wrote and removed (branches that collapsed,
    /// extensions found by seeking) before anything is committed, reading them through the
    /// changes the writer holds. Half the cases give the writer a cap of a few rows, so that
    /// the held changes are written between blocks and inside them (a node written, then
    /// changed again by the same block) all the time.
    #[test]
    fn incremental_root_holds_over_blocks_grouped_in_one_transaction(
        groups in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(op(), 1..24), 1..6),
            1..12,
        ),
        cap in prop::option::of(1usize..8),
    ) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let db = Database::open_with_epochs(dir.path(), Epochs { len: 4 })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let fail = |e: &dyn std::fmt::Display| TestCaseError::fail(e.to_string());
        let mut exists = [false; 256];
        let mut model = StateDump::new();
        let mut number = 0;
        for group in &groups {
            let w = db.begin_write().map_err(|e| fail(&e))?;
            if let Some(cap) = cap {
                w.trie_nodes().set_cap(cap);
            }
            let mut root = B256::ZERO;
            for (j, ops) in group.iter().enumerate() {
                let changes = changeset(ops, &mut exists);
                // The whole state (which writes the held trie nodes) only after the group's
                // last block: the blocks before it walk each other's held nodes.
                let last = j + 1 == group.len();
                root = store_in(&w, &mut model, number, &changes, last)?;
                number += 1;
            }
            w.commit(false).map_err(|e| fail(&e))?;
            check_stored(&db, root)?;
        }
    }
}

/// Hand-made scenarios the random walk may miss, each checked the same way.
#[test]
fn scenarios_collapse_empty_and_recreate() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with_epochs(dir.path(), Epochs { len: 2 }).unwrap();
    let mut exists = [false; 256];
    let wide: Vec<(u16, u8)> = (0..300).map(|s| (s, 1 + (s % 200) as u8)).collect();
    let scenarios: Vec<Vec<Op>> = vec![
        // A deep storage trie and many accounts.
        vec![Op::Write { account: 0, slots: wide.clone() }]
            .into_iter()
            .chain((0..ACCOUNTS).map(|a| Op::Touch { account: a, nonce: a, balance: 1000 }))
            .collect(),
        // Delete all but two slots one by one (branches collapse into leaves and extensions).
        vec![Op::Write { account: 0, slots: (2..300).map(|s| (s, 0)).collect() }],
        // Empty the storage trie without a wipe.
        vec![Op::Write { account: 0, slots: vec![(0, 0), (1, 0)] }],
        // Refill, then self-destruct and re-create with new slots in one block.
        vec![Op::Write { account: 0, slots: wide.clone() }],
        vec![Op::Recreate { account: 0, slots: vec![(7, 7), (300, 1)] }],
        // Re-create again next block, then destroy.
        vec![Op::Recreate { account: 0, slots: wide }],
        vec![Op::Destroy { account: 0 }],
        // Delete accounts until one remains (the root becomes a leaf), then none.
        (1..ACCOUNTS).map(|a| Op::Destroy { account: a }).collect(),
        vec![Op::Destroy { account: 0 }, Op::Destroy { account: 0 }],
        vec![Op::Touch { account: 3, nonce: 1, balance: 1 }],
    ];
    let mut model = StateDump::new();
    for (i, ops) in scenarios.iter().enumerate() {
        let changes = changeset(ops, &mut exists);
        store_block(&db, &mut model, i as u64, &changes).unwrap();
    }
}

/// Trie-node history is stored as deltas against each node's next version, with a whole node
/// at least every `FULL_ROW_EVERY` rows. Over more than twice that many blocks, each changing the
/// top of the account trie and account 0's deep storage trie, a proof at every earlier block
/// must verify with alloy-trie's verifier against that block's root and show the values the
/// model held then; and the stored rows must keep the bound (runs of deltas shorter than
/// `FULL_ROW_EVERY`, with whole rows among them).
#[test]
fn proofs_at_every_old_block_verify_across_runs_of_delta_rows() {
    proofs_at_every_old_block(Epochs { len: 1024 });
}

/// The same with history epochs of 5 blocks: every node's first row in an epoch is whole, and
/// reads of nodes and leaves go through the epoch index and the open epoch.
#[test]
fn proofs_at_every_old_block_verify_across_history_epochs() {
    proofs_at_every_old_block(Epochs { len: 5 });
}

/// The same with epochs of one block: the 71 blocks span two runs of the epoch index
/// (`storage::history::keys::EPOCHS_PER_RUN`), so reads at early blocks cross from one index row to the next.
#[test]
fn proofs_at_every_old_block_verify_across_epoch_index_runs() {
    assert!(
        2 * u64::from(loupe::storage::history::nodes::FULL_ROW_EVERY) + 7
            > u64::from(loupe::storage::history::keys::EPOCHS_PER_RUN)
    );
    proofs_at_every_old_block(Epochs { len: 1 });
}

fn proofs_at_every_old_block(epochs: Epochs) {
    use alloy_primitives::{Bytes, keccak256};
    use alloy_trie::proof::verify_proof;
    use alloy_trie::root::storage_root_unhashed;
    use alloy_trie::{EMPTY_ROOT_HASH, Nibbles, TrieAccount};
    use loupe::storage::history::nodes::{FULL_ROW_EVERY, NodeRow, node_row};
    use loupe::storage::tables;
    use loupe::trie::prove_account;
    use redb::ReadableTable;

    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with_epochs(dir.path(), epochs).unwrap();
    let mut exists = [false; 256];
    let mut model = StateDump::new();
    let mut snapshots = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let blocks = 2 * u64::from(FULL_ROW_EVERY) + 7;
    for number in 0..blocks {
        let mut ops: Vec<Op> = (0..6)
            .map(|_| Op::Touch {
                account: rand(u64::from(ACCOUNTS)) as u8,
                nonce: rand(200) as u8,
                balance: rand(1 << 20) as u32,
            })
            .collect();
        let slots = (0..4).map(|_| (rand(400) as u16, rand(4) as u8)).collect();
        ops.push(Op::Write { account: 0, slots });
        if number % 9 == 4 {
            ops.push(Op::Recreate { account: 3, slots: vec![(rand(24) as u16, 1 + number as u8)] });
        }
        if number % 13 == 6 {
            ops.push(Op::Destroy { account: rand(u64::from(ACCOUNTS)) as u8 });
        }
        let changes = changeset(&ops, &mut exists);
        let root = store_block(&db, &mut model, number, &changes).unwrap();
        snapshots.push((root, model.clone()));
    }

    let reader = db.begin_read().unwrap();
    let mut proofs = 0;
    for (number, (root, state)) in snapshots.iter().enumerate() {
        let number = number as u64;
        // Account 0 (deep storage), account 3 (re-created), a rotating sample, and an absent one.
        let mut sample: Vec<Address> = [0u8, 3, (number % 200) as u8, ((number * 37) % 200) as u8]
            .into_iter()
            .map(address)
            .collect();
        sample.push(Address::repeat_byte(0x42));
        for who in sample {
            let held = state.get(&who);
            let slots: Vec<B256> =
                held.map(|(_, s)| s.keys().map(|k| B256::from(*k)).collect()).unwrap_or_default();
            let proof = prove_account(&reader, number, who, &slots).unwrap();
            let expected = held.map(|(a, s)| TrieAccount {
                nonce: a.nonce,
                balance: a.balance,
                code_hash: a.code_hash,
                storage_root: storage_root_unhashed(s.iter().map(|(k, v)| (B256::from(*k), *v))),
            });
            verify_proof(
                *root,
                Nibbles::unpack(keccak256(who)),
                expected.as_ref().map(alloy_rlp::encode),
                &proof.account_proof,
            )
            .unwrap_or_else(|e| panic!("account {who} at block {number}: {e}"));
            let storage_root = expected.map_or(EMPTY_ROOT_HASH, |a| a.storage_root);
            for sp in &proof.storage_proofs {
                let value = held.and_then(|(_, s)| s.get(&U256::from_be_bytes(sp.slot.0)));
                assert_eq!(sp.value, value.copied().unwrap_or_default());
                let nodes: Vec<Bytes> = sp.proof.clone();
                verify_proof(
                    storage_root,
                    Nibbles::unpack(keccak256(sp.slot)),
                    value.map(alloy_rlp::encode),
                    &nodes,
                )
                .unwrap_or_else(|e| panic!("{who} slot {} at block {number}: {e}", sp.slot));
                proofs += 1;
            }
            proofs += 1;
        }
    }
    assert!(proofs > 1_000, "only {proofs} proofs checked");
    drop(reader);
    drop(db);

    // The rows themselves: deltas, runs bounded, whole rows where runs end.
    let raw = redb::Database::open(dir.path().join(loupe::storage::DB_FILE)).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&raw).unwrap();
    let history = txn.open_table(tables::ACCOUNT_TRIE_HISTORY).unwrap();
    let (mut deltas, mut whole, mut longest) = (0, 0, 0u8);
    for item in history.iter().unwrap() {
        let (_, v) = item.unwrap();
        match node_row(v.value()).unwrap() {
            NodeRow::Delta { run, .. } => {
                deltas += 1;
                longest = longest.max(run);
            }
            NodeRow::Whole(_) => whole += 1,
            NodeRow::Absent => {}
        }
    }
    assert!(whole > 0, "no run of deltas ended in a whole row");
    if epochs.len > 2 * u64::from(FULL_ROW_EVERY) {
        assert!(deltas > 2 * whole, "{deltas} delta rows, {whole} whole");
        assert_eq!(longest, FULL_ROW_EVERY - 1);
    } else {
        // Runs end at each epoch's first row, which is whole (every row, with epochs of one).
        assert_eq!(deltas > 0, epochs.len > 1, "{deltas} delta rows");
        assert_eq!(u64::from(longest), epochs.len - 1);
    }
}
