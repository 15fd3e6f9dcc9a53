//! A process-wide cache of contract code by its hash, read from the database and analysed once.
//!
//! Each EVM call used to read a contract's code from `bytecodes`, copy it, and scan it for jump
//! destinations (`Bytecode::new_raw`), which costs time linear in the code's size on every call
//! to a large contract. Code is content-addressed (the key is `keccak(code)`), so an entry can
//! never go stale: not across snapshots, reorgs or databases. A `Bytecode` is one `Arc`, so a
//! hit costs a lock, a map look-up and a reference count.
//!
//! Memory is bounded by [`BUDGET`] bytes of code and jump tables; the map is emptied when a new
//! entry would pass it (cheap, and the hot contracts come back on their next call).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use alloy_primitives::B256;
use revm::bytecode::Bytecode;

/// Most bytes of code (and jump tables) kept: 32 MiB, about 1,200 contracts of the maximum
/// size and far more typical ones.
pub(crate) const BUDGET: usize = 32 << 20;

#[derive(Default)]
struct Cache {
    codes: HashMap<B256, Bytecode>,
    bytes: usize,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

/// What an entry of `len` bytes of code costs: the code, its jump table (a bit per byte) and
/// the entry itself.
fn cost(len: usize) -> usize {
    len + len / 8 + 128
}

/// The code with hash `hash`: from the cache, or from `load` (then kept).
pub(crate) fn code<E>(
    hash: &B256,
    load: impl FnOnce() -> Result<Bytecode, E>,
) -> Result<Bytecode, E> {
    if let Some(code) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).codes.get(hash) {
        return Ok(code.clone());
    }
    // Loaded and analysed outside the lock: two threads may both load a cold contract, and the
    // second insert replaces an equal value.
    let code = load()?;
    let c = cost(code.original_byte_slice().len());
    if c <= BUDGET {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if cache.bytes + c > BUDGET {
            cache.codes.clear();
            cache.bytes = 0;
        }
        if cache.codes.insert(*hash, code.clone()).is_none() {
            cache.bytes += c;
        }
    }
    Ok(code)
}

/// Bytes the cache holds now (for tests).
#[cfg(test)]
pub(crate) fn held_bytes() -> usize {
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).bytes
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
