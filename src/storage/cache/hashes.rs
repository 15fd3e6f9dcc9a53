//! A per-thread memo of `keccak256` for the addresses and slots that state reads hash.
//!
//! State is keyed by `keccak(address)` and `keccak(slot)` (one copy of the state, keyed as the
//! trie keys it), so every account and slot an RPC call reads costs a Keccak-f permutation:
//! about 30 % of an in-process `trace_call` of a small contract (BENCHMARKS.md, session 43).
//! Calls read the same contracts, slots and block beneficiaries again and again, so the hashes
//! are kept in a small direct-mapped table per thread: an index from the key's bits, one
//! compare, no locks, no eviction bookkeeping. Written here because the cache crates (`lru`,
//! `quick_cache`) keep a hash map with recency lists, which costs more per look-up than the
//! table below and needs a lock to share; a hash of 20 or 32 bytes is cheap enough that only
//! a table this simple pays.
//!
//! Memory is bounded: [`ENTRIES`] keys and hashes per kind, about 116 KiB per thread that reads
//! state. The import's execution thread reads through it too: where keys rarely repeat, a miss
//! costs one compare and a store beside the hash it had to compute anyway.

use std::cell::RefCell;

use alloy_primitives::{Address, B256, U256, keccak256};

/// Entries per table (a power of two).
const ENTRIES: usize = 1024;
const INDEX_BITS: u32 = ENTRIES.trailing_zeros();

/// One direct-mapped table: slot `i` holds a key and its hash. Every slot starts as the
/// all-zero key with its real hash, so no slot is ever "empty" and a look-up is one compare.
struct Table<const N: usize> {
    keys: Box<[[u8; N]]>,
    hashes: Box<[B256]>,
}

impl<const N: usize> Table<N> {
    fn new() -> Self {
        let zero = keccak256([0u8; N]);
        Self { keys: vec![[0u8; N]; ENTRIES].into(), hashes: vec![zero; ENTRIES].into() }
    }

    fn hash(&mut self, key: &[u8; N]) -> B256 {
        let i = index(key);
        if self.keys[i] == *key {
            return self.hashes[i];
        }
        let h = keccak256(key);
        self.keys[i] = *key;
        self.hashes[i] = h;
        h
    }
}

/// The table index of `key`: its 8-byte words folded and multiplied by 2^64 / φ (Fibonacci
/// hashing), so small slot numbers and addresses that share a prefix spread over the table.
fn index<const N: usize>(key: &[u8; N]) -> usize {
    let mut folded = 0u64;
    for chunk in key.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        folded = folded.rotate_left(23) ^ u64::from_le_bytes(word);
    }
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - INDEX_BITS)) as usize
}

struct Memo {
    addresses: Table<20>,
    slots: Table<32>,
}

thread_local! {
    static MEMO: RefCell<Option<Box<Memo>>> = const { RefCell::new(None) };
}

fn with_memo<R>(f: impl FnOnce(&mut Memo) -> R) -> R {
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let memo = m
            .get_or_insert_with(|| Box::new(Memo { addresses: Table::new(), slots: Table::new() }));
        f(memo)
    })
}

/// `keccak256(address)`, from this thread's memo when it was hashed recently.
pub(crate) fn hashed_address(address: &Address) -> B256 {
    with_memo(|m| m.addresses.hash(&address.0.0))
}

/// `keccak256` of the 32-byte big-endian `slot`, from this thread's memo when it was hashed
/// recently.
pub(crate) fn hashed_slot(slot: &U256) -> B256 {
    with_memo(|m| m.slots.hash(&slot.to_be_bytes::<32>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that share a table slot evict each other and still hash right; keys read again hash
    /// right whether or not they were evicted; the all-zero key (every slot's initial key) too.
    #[test]
    fn the_memo_answers_keccak_for_every_key() {
        let mut seen_same_index = false;
        let keys: Vec<Address> =
            (0u64..5_000).map(|i| Address::from_word(keccak256(i.to_be_bytes()))).collect();
        for round in 0..3 {
            for (n, a) in keys.iter().enumerate() {
                assert_eq!(hashed_address(a), keccak256(a), "address {n}, round {round}");
            }
        }
        for n in 1..keys.len() {
            if index(&keys[n].0.0) == index(&keys[0].0.0) {
                seen_same_index = true;
            }
        }
        assert!(seen_same_index, "5,000 keys over 1,024 slots must collide");
        assert_eq!(hashed_address(&Address::ZERO), keccak256(Address::ZERO));
        for round in 0..2 {
            for s in (0u64..3_000).map(U256::from).chain([U256::MAX, U256::ZERO]) {
                assert_eq!(hashed_slot(&s), keccak256(s.to_be_bytes::<32>()), "{s} {round}");
            }
        }
    }

    /// Small slot numbers, the usual layout of a contract's fields, land in distinct entries.
    #[test]
    fn small_slots_spread_over_the_table() {
        let used: std::collections::HashSet<usize> =
            (0u64..64).map(|s| index(&U256::from(s).to_be_bytes::<32>())).collect();
        assert!(used.len() >= 60, "{} distinct entries for 64 slots", used.len());
    }
}
