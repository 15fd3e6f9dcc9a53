//! The generated genesis: accounts and keys derived from the seed, written to `genesis.json`
//! one allocation entry (and one storage slot) at a time, so any number of accounts, and a
//! contract with any number of slots, fit in constant memory.

use std::io::Write;

use alloy_primitives::{Address, B256, Bytes, U256, keccak256};
use alloy_signer_local::PrivateKeySigner;
use serde_json::json;

use super::contracts::{
    BIG, BIG_RUNTIME, COUNTER, POOL, SCRATCH, SCRATCH_RUNTIME, TOKEN, counter_runtime, hex_bytes,
    pool_runtime, token_balance_slot, token_runtime,
};
use super::progress::GeneratorProgress;
use crate::dev::DevError;

/// Chain id of generated chains (distinct from the dev chain's, so their transactions cannot
/// be replayed there).
pub const GENERATED_CHAIN_ID: u64 = 42424;

/// Sender accounts: their keys are derived from the seed ([`sender_key`]), so the generator
/// can sign for them.
pub const SENDERS: u64 = 256;

/// Base fee of the genesis block, in wei (1 gwei).
pub const GENESIS_BASE_FEE: u64 = 1_000_000_000;

/// 10^18 wei.
pub(crate) const ETHER: U256 = U256::from_limbs([1_000_000_000_000_000_000, 0, 0, 0]);

/// Each sender's genesis balance: 1,000,000 ETH.
pub fn sender_balance() -> U256 {
    ETHER * U256::from(1_000_000u64)
}

/// Each sender's genesis `Token` balance: 1,000,000 tokens of 18 decimals.
pub fn sender_token_balance() -> U256 {
    ETHER * U256::from(1_000_000u64)
}

/// The pool's two reserves at genesis (slots 0 and 1): 10^9 tokens each.
pub fn pool_reserve() -> U256 {
    ETHER * U256::from(1_000_000_000u64)
}

/// Funded account `index` of `seed`: the last 20 bytes of keccak256(seed ‖ index), both as
/// 8-byte big-endian integers.
pub fn funded_account(seed: u64, index: u64) -> Address {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&seed.to_be_bytes());
    buf[8..].copy_from_slice(&index.to_be_bytes());
    Address::from_slice(&keccak256(buf)[12..])
}

/// Genesis balance of funded account `index`: 0.001 to 100 ETH, in steps of 0.001 ETH, from
/// the first bytes of keccak256(seed ‖ "balance" ‖ index).
pub fn funded_balance(seed: u64, index: u64) -> U256 {
    let mut buf = Vec::with_capacity(23);
    buf.extend_from_slice(&seed.to_be_bytes());
    buf.extend_from_slice(b"balance");
    buf.extend_from_slice(&index.to_be_bytes());
    let h = keccak256(&buf);
    let steps = u64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]])) % 100_000 + 1;
    U256::from(steps) * U256::from(1_000_000_000_000_000u64)
}

/// Storage slot `index` of the big contract ([`BIG`]) of `seed`: keccak256(seed ‖ "slot" ‖
/// index), both as 8-byte big-endian integers. Slots `0 .. M` are set at genesis (with
/// `--contract-slots M`); the blocks add new ones from index `M` on, in order.
pub fn big_slot(seed: u64, index: u64) -> B256 {
    let mut buf = Vec::with_capacity(20);
    buf.extend_from_slice(&seed.to_be_bytes());
    buf.extend_from_slice(b"slot");
    buf.extend_from_slice(&index.to_be_bytes());
    keccak256(&buf)
}

/// Genesis value of big-contract slot `index` of `seed`: one plus the first 8 bytes of
/// keccak256(seed ‖ "value" ‖ index) as a big-endian integer (so 1 to 2^64, never zero).
pub fn big_slot_value(seed: u64, index: u64) -> U256 {
    let mut buf = Vec::with_capacity(21);
    buf.extend_from_slice(&seed.to_be_bytes());
    buf.extend_from_slice(b"value");
    buf.extend_from_slice(&index.to_be_bytes());
    let h = keccak256(&buf);
    let mut first = [0u8; 8];
    first.copy_from_slice(&h[..8]);
    U256::from(u64::from_be_bytes(first)) + U256::from(1u64)
}

/// Private key of sender `index` of `seed`: keccak256(seed ‖ "key" ‖ index), re-hashed until it
/// is a valid secp256k1 scalar (non-zero, below the group order).
pub fn sender_key(seed: u64, index: u64) -> B256 {
    let mut buf = Vec::with_capacity(19);
    buf.extend_from_slice(&seed.to_be_bytes());
    buf.extend_from_slice(b"key");
    buf.extend_from_slice(&index.to_be_bytes());
    let mut key = keccak256(&buf);
    while PrivateKeySigner::from_bytes(&key).is_err() {
        key = keccak256(key);
    }
    key
}

/// The signers of the [`SENDERS`] sender accounts of `seed`, in index order.
pub fn sender_signers(seed: u64) -> Result<Vec<PrivateKeySigner>, DevError> {
    (0..SENDERS)
        .map(|i| {
            PrivateKeySigner::from_bytes(&sender_key(seed, i))
                .map_err(|e| DevError::Sign(e.to_string()))
        })
        .collect()
}

/// What goes into a generated genesis.
#[derive(Debug, Clone)]
pub(crate) struct GenesisPlan<'a> {
    /// The seed (funded accounts and their balances).
    pub(crate) seed: u64,
    /// Number of funded accounts.
    pub(crate) accounts: u64,
    /// Storage slots of the big contract (none: no big contract).
    pub(crate) contract_slots: u64,
    /// Block gas limit.
    pub(crate) gas_limit: u64,
    /// The senders' addresses.
    pub(crate) senders: &'a [Address],
}

/// The genesis fields before `alloc`: every fork through Osaka active at genesis, merged
/// (TTD 0), like the dev chain's genesis.
fn header_fields(plan: &GenesisPlan<'_>) -> serde_json::Value {
    json!({
        "config": crate::dev::all_forks_config(GENERATED_CHAIN_ID),
        "nonce": "0x0",
        "timestamp": "0x0",
        "extraData": "0x6c6f7570652067656e6572617465",
        "gasLimit": format!("{:#x}", plan.gas_limit),
        "difficulty": "0x0",
        "mixHash": "0x0000000000000000000000000000000000000000000000000000000000000000",
        "coinbase": "0x0000000000000000000000000000000000000000",
        "baseFeePerGas": format!("{GENESIS_BASE_FEE:#x}"),
    })
}

/// Writes one `"0x…":{…}` alloc entry (after a comma unless it is the first): a contract, of
/// nonce one, if it has `code`; and its `storage`, if any, written slot by slot as the iterator
/// yields them.
fn entry(
    out: &mut impl Write,
    first: &mut bool,
    address: Address,
    balance: U256,
    code: Option<&Bytes>,
    storage: impl IntoIterator<Item = (B256, U256)>,
) -> std::io::Result<()> {
    if !std::mem::take(first) {
        out.write_all(b",\n")?;
    }
    write!(out, "\"{address:#x}\":{{\"balance\":\"{balance:#x}\"")?;
    if let Some(code) = code {
        write!(out, ",\"nonce\":\"0x1\",\"code\":\"{code}\"")?;
    }
    let mut open = false;
    for (slot, value) in storage {
        out.write_all(if std::mem::replace(&mut open, true) { b"," } else { b",\"storage\":{" })?;
        write!(out, "\"{slot}\":\"{}\"", B256::from(value))?;
    }
    if open {
        out.write_all(b"}")?;
    }
    out.write_all(b"}")
}

/// Writes the genesis to `out`, streaming: the system contracts, the chain's contracts (the big
/// one with its slots in index order, if there is one), the senders, then the funded accounts
/// in index order.
pub(crate) fn write_genesis(
    out: &mut impl Write,
    plan: &GenesisPlan<'_>,
    progress: &mut GeneratorProgress,
) -> Result<(), DevError> {
    use alloy_eips::{eip2935, eip4788, eip7002, eip7251};
    let io = |e| DevError::io("writing genesis.json", e);
    let head = header_fields(plan).to_string();
    // `head` is an object; reopen it to append "alloc".
    let head = head.strip_suffix('}').unwrap_or(&head);
    writeln!(out, "{head},\"alloc\":{{").map_err(io)?;
    let mut first = true;
    for (address, code) in [
        (eip4788::BEACON_ROOTS_ADDRESS, &eip4788::BEACON_ROOTS_CODE),
        (eip2935::HISTORY_STORAGE_ADDRESS, &eip2935::HISTORY_STORAGE_CODE),
        (
            eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
            &eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_CODE,
        ),
        (
            eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
            &eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_CODE,
        ),
    ] {
        entry(out, &mut first, address, U256::ZERO, Some(code), []).map_err(io)?;
    }
    // Token: every sender holds tokens; slot 1 is the total supply.
    let mut token_storage: Vec<(B256, U256)> =
        plan.senders.iter().map(|s| (token_balance_slot(*s), sender_token_balance())).collect();
    token_storage.push((
        B256::from(U256::from(1u64)),
        sender_token_balance() * U256::from(plan.senders.len()),
    ));
    token_storage.sort();
    let reserves = [(B256::ZERO, pool_reserve()), (B256::from(U256::from(1u64)), pool_reserve())];
    for (address, code, storage) in [
        (TOKEN, token_runtime()?, token_storage.as_slice()),
        (POOL, pool_runtime()?, &reserves[..]),
        (SCRATCH, hex_bytes(SCRATCH_RUNTIME)?, &[][..]),
        (COUNTER, counter_runtime()?, &[][..]),
    ] {
        entry(out, &mut first, address, U256::ZERO, Some(&code), storage.iter().copied())
            .map_err(io)?;
    }
    if plan.contract_slots > 0 {
        let (seed, total) = (plan.seed, plan.contract_slots);
        let slots = (0..total).map(|i| {
            if i % 65_536 == 0 {
                progress.slots(i, total);
            }
            (big_slot(seed, i), big_slot_value(seed, i))
        });
        entry(out, &mut first, BIG, U256::ZERO, Some(&hex_bytes(BIG_RUNTIME)?), slots)
            .map_err(io)?;
        progress.slots(total, total);
    }
    for s in plan.senders {
        entry(out, &mut first, *s, sender_balance(), None, []).map_err(io)?;
    }
    for i in 0..plan.accounts {
        let (address, balance) = (funded_account(plan.seed, i), funded_balance(plan.seed, i));
        entry(out, &mut first, address, balance, None, []).map_err(io)?;
        if i % 65_536 == 0 {
            progress.accounts(i, plan.accounts);
        }
    }
    progress.accounts(plan.accounts, plan.accounts);
    out.write_all(b"\n}}\n").map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivations_are_stable_and_keys_valid() {
        assert_eq!(funded_account(1, 0), funded_account(1, 0));
        assert_ne!(funded_account(1, 0), funded_account(2, 0));
        assert_ne!(funded_account(1, 0), funded_account(1, 1));
        let b = funded_balance(1, 5);
        assert!(b >= U256::from(1_000_000_000_000_000u64) && b <= ETHER * U256::from(100u64));
        let signers = sender_signers(1).unwrap();
        assert_eq!(signers.len() as u64, SENDERS);
        assert_eq!(signers[3].to_bytes(), sender_key(1, 3));
        assert_ne!(big_slot(1, 0), big_slot(1, 1));
        assert_ne!(big_slot(1, 0), big_slot(2, 0));
        assert!((0..1000).all(|i| !big_slot_value(1, i).is_zero()));
    }

    #[test]
    fn the_big_contract_is_written_with_every_derived_slot() {
        let senders = [Address::repeat_byte(7)];
        let plan = GenesisPlan {
            seed: 4,
            accounts: 3,
            contract_slots: 1000,
            gas_limit: 30_000_000,
            senders: &senders,
        };
        let mut out = Vec::new();
        write_genesis(&mut out, &plan, &mut GeneratorProgress::new(true)).unwrap();
        let genesis: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let alloc = genesis["alloc"].as_object().unwrap();
        // 4 system contracts, 4 contracts, the big one, 1 sender, 3 accounts.
        assert_eq!(alloc.len(), 13);
        let big = &alloc[&format!("{BIG:#x}")];
        assert_eq!(big["code"], format!("0x{BIG_RUNTIME}"));
        let storage = big["storage"].as_object().unwrap();
        assert_eq!(storage.len(), 1000);
        for i in [0, 1, 500, 999] {
            let value = &storage[&big_slot(4, i).to_string()];
            assert_eq!(*value, B256::from(big_slot_value(4, i)).to_string());
        }

        // Without it, no big contract at all.
        let mut out = Vec::new();
        write_genesis(
            &mut out,
            &GenesisPlan { contract_slots: 0, ..plan },
            &mut GeneratorProgress::new(true),
        )
        .unwrap();
        let genesis: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(genesis["alloc"].as_object().unwrap().len(), 12);
        assert!(genesis["alloc"].get(format!("{BIG:#x}")).is_none());
    }
}
