//! A process-wide cache of contract code by its hash, read from the database and analysed once.
//!
//! Each EVM call used to read a contract's code from `bytecodes`, copy it, and scan it for jump
//! destinations (`Bytecode::new_raw`), which costs time linear in the code's size on every call
//! to a large contract. Code is content-addressed (the key is `keccak(code)`), so an entry can
//! never go stale: not across snapshots, reorgs or databases. A `Bytecode` is one `Arc`, so a
//! hit costs a shard's read lock, a map look-up and a reference count.
//!
//! Memory is bounded by [`BUDGET`] bytes of code and jump tables (quick_cache, as the segments'
//! block cache and the server's caches: least-recently-used-like eviction by weight).

use std::sync::LazyLock;

use alloy_primitives::B256;
use revm::bytecode::Bytecode;

/// Most bytes of code (and jump tables) kept: 32 MiB, about 1,200 contracts of the maximum
/// size and far more typical ones.
pub(crate) const BUDGET: usize = 32 << 20;

/// The cache's weigher: an entry of `len` bytes of code costs the code, its jump table (a bit
/// per byte) and the entry itself.
#[derive(Debug, Clone, Copy)]
struct CodeWeight;

impl quick_cache::Weighter<B256, Bytecode> for CodeWeight {
    fn weight(&self, _: &B256, code: &Bytecode) -> u64 {
        let len = code.original_byte_slice().len();
        (len + len / 8 + 128) as u64
    }
}

static CACHE: LazyLock<quick_cache::sync::Cache<B256, Bytecode, CodeWeight>> =
    LazyLock::new(|| quick_cache::sync::Cache::with_weighter(4096, BUDGET as u64, CodeWeight));

/// The code with hash `hash`: from the cache, or from `load` (then kept). The load runs
/// outside the cache's locks: two threads may both load a cold contract, and the second insert
/// replaces an equal value. (`get_or_insert_with`, which makes the second wait, did not keep a
/// contract inserted into the full cache in the test below.)
pub(crate) fn code<E>(
    hash: &B256,
    load: impl FnOnce() -> Result<Bytecode, E>,
) -> Result<Bytecode, E> {
    if let Some(code) = CACHE.get(hash) {
        return Ok(code);
    }
    let code = load()?;
    CACHE.insert(*hash, code.clone());
    Ok(code)
}

/// Bytes the cache holds now (for tests).
#[cfg(test)]
pub(crate) fn held_bytes() -> usize {
    CACHE.weight() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::keccak256;

    /// A hit returns the code that was loaded, without loading again; the cache stays within
    /// its budget while far more code than the budget passes through it.
    #[test]
    fn the_cache_answers_loaded_code_and_stays_within_its_budget() {
        let raw = |i: u32| {
            let mut v = vec![0x5b; 24 * 1024];
            v[..4].copy_from_slice(&i.to_be_bytes());
            v
        };
        let mut loads = 0;
        for round in 0..2 {
            for i in 0..3_000u32 {
                let bytes = raw(i);
                let hash = keccak256(&bytes);
                let got = code(&hash, || {
                    loads += 1;
                    Ok::<_, ()>(Bytecode::new_raw(bytes.clone().into()))
                })
                .expect("loads");
                assert_eq!(got.original_byte_slice(), &bytes[..], "contract {i}, round {round}");
                assert!(held_bytes() <= BUDGET);
            }
        }
        assert!(loads > 3_000, "3,000 contracts of 24 KiB do not fit in the budget");
        let hot = raw(7);
        let hash = keccak256(&hot);
        code(&hash, || Ok::<_, ()>(Bytecode::new_raw(hot.clone().into()))).expect("loads");
        let again = code(&hash, || Err("loaded a cached contract again")).expect("a hit");
        assert_eq!(again.original_byte_slice(), &hot[..]);
    }
}
