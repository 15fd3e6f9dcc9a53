//! Proofs at every block of the fixture chain, checked with alloy-trie's independent proof
//! verifier against each block header's `stateRoot`: every account and slot that exists at the
//! block, plus absent accounts and slots (exclusion proofs). Expected account values are built
//! from the state dump with alloy's own storage-root function, not from loupe's trie.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use alloy_primitives::{Address, B256, Bytes, U256, keccak256};
use alloy_trie::proof::verify_proof;
use alloy_trie::root::storage_root_unhashed;
use alloy_trie::{EMPTY_ROOT_HASH, Nibbles, TrieAccount};
use common::{CHAIN_LEN, Fixture};
use loupe::import::{import_files, init_genesis};
use loupe::storage::Database;
use loupe::trie::prove_account;

fn check_account(
    root: B256,
    address: Address,
    expected: Option<(TrieAccount, Vec<(U256, U256)>)>,
    proof: &loupe::trie::AccountProof,
    absent_slots: &[B256],
) {
    let key = Nibbles::unpack(keccak256(address));
    let value = expected.as_ref().map(|(a, _)| alloy_rlp::encode(a));
    verify_proof(root, key, value, &proof.account_proof)
        .unwrap_or_else(|e| panic!("account proof of {address}: {e}"));
    let storage_root = expected.as_ref().map_or(EMPTY_ROOT_HASH, |(a, _)| a.storage_root);
    let slots = expected.map(|(_, s)| s).unwrap_or_default();
    let mut asked = slots.iter().map(|(s, _)| B256::from(*s)).collect::<Vec<_>>();
    asked.extend_from_slice(absent_slots);
    assert_eq!(proof.storage_proofs.len(), asked.len());
    for (sp, slot) in proof.storage_proofs.iter().zip(&asked) {
        assert_eq!(sp.slot, *slot);
        let want = slots.iter().find(|(s, _)| B256::from(*s) == *slot).map(|(_, v)| *v);
        assert_eq!(sp.value, want.unwrap_or_default(), "value of {address} slot {slot}");
        let proof: Vec<Bytes> = sp.proof.clone();
        verify_proof(
            storage_root,
            Nibbles::unpack(keccak256(slot)),
            want.map(alloy_rlp::encode),
            &proof,
        )
        .unwrap_or_else(|e| panic!("storage proof of {address} slot {slot}: {e}"));
    }
}

#[test]
fn proofs_of_every_account_and_slot_at_every_block_verify_against_the_header() {
    let Some(fx) = Fixture::load() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let (spec, _) = init_genesis(&db, &fx.genesis_text).unwrap();
    import_files(&db, &spec, &[fx.chain_path()]).unwrap();
    let reader = db.begin_read().unwrap();
    let absent_accounts = [Address::repeat_byte(0x42), Address::with_last_byte(0x99)];
    let absent_slots = [B256::repeat_byte(0x77), B256::with_last_byte(200)];
    let mut proofs = 0usize;
    for n in 0..=CHAIN_LEN {
        let root = reader.header(n).unwrap().unwrap().state_root;
        let dump = reader.state_at(n).unwrap().dump().unwrap();
        for (address, (account, storage)) in &dump {
            let slots: Vec<(U256, U256)> = storage.iter().map(|(k, v)| (*k, *v)).collect();
            let trie_account = TrieAccount {
                nonce: account.nonce,
                balance: account.balance,
                storage_root: storage_root_unhashed(
                    slots.iter().map(|(k, v)| (B256::from(*k), *v)),
                ),
                code_hash: account.code_hash,
            };
            let mut asked: Vec<B256> = slots.iter().map(|(s, _)| B256::from(*s)).collect();
            asked.extend_from_slice(&absent_slots);
            let proof = prove_account(&reader, n, *address, &asked).unwrap();
            check_account(root, *address, Some((trie_account, slots)), &proof, &absent_slots);
            proofs += 1 + asked.len();
        }
        for address in absent_accounts {
            assert!(!dump.contains_key(&address));
            let proof = prove_account(&reader, n, address, &absent_slots).unwrap();
            assert_eq!(proof.account, None);
            check_account(root, address, None, &proof, &absent_slots);
        }
    }
    assert!(proofs > 5_000, "only {proofs} proofs checked");
}

#[test]
fn a_proof_against_the_wrong_block_root_does_not_verify() {
    let Some(fx) = Fixture::load() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let (spec, _) = init_genesis(&db, &fx.genesis_text).unwrap();
    import_files(&db, &spec, &[fx.chain_path()]).unwrap();
    let reader = db.begin_read().unwrap();
    // An account that changes between blocks 1 and 54: its proof at 1 fails at 54's root.
    let dump1 = reader.state_at(1).unwrap().dump().unwrap();
    let dump54 = reader.state_at(CHAIN_LEN).unwrap().dump().unwrap();
    let (address, _) = dump1
        .iter()
        .find(|(a, v)| dump54.get(*a).is_some_and(|w| w.0 != v.0))
        .expect("an account that changed");
    let proof = prove_account(&reader, 1, *address, &[]).unwrap();
    let root54 = reader.header(CHAIN_LEN).unwrap().unwrap().state_root;
    let value = proof.account.map(|a| alloy_rlp::encode(a.trie_account()));
    assert!(
        verify_proof(
            root54,
            Nibbles::unpack(keccak256(address)),
            value.clone(),
            &proof.account_proof
        )
        .is_err()
    );
    let root1 = reader.header(1).unwrap().unwrap().state_root;
    verify_proof(root1, Nibbles::unpack(keccak256(address)), value, &proof.account_proof).unwrap();
}
