//! The sample history of the dev chain (20 blocks): a hand-assembled counter, an ERC-20-style
//! token, nested CALL/STATICCALL/DELEGATECALL, a revert, a contract created and destroyed in
//! one transaction, and all five transaction types (legacy, access list, EIP-1559, blob,
//! EIP-7702 set-code).

use alloy_consensus::{
    SignableTransaction, Signed, TxEip1559, TxEip2930, TxEip4844, TxEip4844Variant, TxEip7702,
    TxEnvelope, TxLegacy,
};
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_eips::eip7702::Authorization;
use alloy_hardforks::EthereumHardforks;
use alloy_primitives::{Address, Bytes, Signature, TxKind, U256, address, hex};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;

use super::contracts::{EPHEMERAL_INIT, PROBER_INIT, STAMP_INIT, TOKEN_INIT};
use super::{BlockBuilder, DEV_CHAIN_ID, DevError, dev_signers};
use crate::chain::ChainSpec;
use crate::storage::Database;

/// Address of the `Counter` contract the history deploys (first contract of dev account 0).
pub const COUNTER: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");

/// `Counter` runtime, hand-assembled (18 bytes): every call adds one to slot 0 and returns the
/// new value.
///
/// ```text
/// 6000 54     PUSH1 0 SLOAD        ; n = slot[0]
/// 6001 01     PUSH1 1 ADD          ; n + 1
/// 80          DUP1
/// 6000 55     PUSH1 0 SSTORE       ; slot[0] = n + 1
/// 6000 52     PUSH1 0 MSTORE       ; mem[0..32] = n + 1
/// 6020 6000 f3  RETURN(0, 32)
/// ```
pub const COUNTER_RUNTIME: &str = "6000546001018060005560005260206000f3";

/// `Counter` init code: `CODECOPY(0, 11, 18); RETURN(0, 18)` followed by the runtime.
pub const COUNTER_INIT: &str = "601280600b6000396000f3";

/// Blocks in the sample history.
pub const HISTORY_BLOCKS: u64 = 20;

const GWEI: u128 = 1_000_000_000;

/// Signs `tx` with `signer` into an envelope (the dev history's and the generator's).
pub(crate) fn sign<T>(signer: &PrivateKeySigner, tx: T) -> Result<TxEnvelope, DevError>
where
    T: SignableTransaction<Signature>,
    TxEnvelope: From<Signed<T>>,
{
    let sig =
        signer.sign_hash_sync(&tx.signature_hash()).map_err(|e| DevError::Sign(e.to_string()))?;
    Ok(tx.into_signed(sig).into())
}

/// Addresses of the contracts the sample history deploys (fixed: same keys, same nonces).
#[derive(Debug, Clone, Copy)]
pub struct SampleContracts {
    /// `Counter` (block 1).
    pub counter: Address,
    /// `Token` (block 3).
    pub token: Address,
    /// `Stamp` (block 4).
    pub stamp: Address,
    /// `Prober` (block 4).
    pub prober: Address,
}

/// The sample contracts' addresses: dev account 0's creations with nonces 0, 1, 2, 3.
pub fn sample_contracts() -> SampleContracts {
    let a0 = super::dev_accounts().first().copied().unwrap_or_default();
    SampleContracts {
        counter: a0.create(0),
        token: a0.create(1),
        stamp: a0.create(2),
        prober: a0.create(3),
    }
}

/// Selector of `Prober.probe(address,address,address)`.
pub const PROBE_SELECTOR: &str = "de751015";
/// Selector of `Prober.fail()`.
pub const FAIL_SELECTOR: &str = "a9cc4718";

trait WithGas {
    fn gas(self, gas: u64) -> Self;
}

impl WithGas for TxEip1559 {
    fn gas(mut self, gas: u64) -> Self {
        self.gas_limit = gas;
        self
    }
}

/// How many times its Osaka gas limit a sample transaction gets on a chain whose history
/// reaches Amsterdam: EIP-8037 charges state gas on top of the regular gas (1,530 gas a state
/// byte in revm 43: 183,600 for a new account, 97,920 for a storage slot set from zero, 1,530 a
/// byte of deployed code), which the Osaka limits do not cover (a payment to a fresh address
/// needs about 205,000, `Prober`'s deployment about 2 million). Unused gas is refunded, so only
/// the limits change; on the default (Osaka) chain the factor is 1 and its blocks stay the same.
const AMSTERDAM_GAS_FACTOR: u64 = 3;

fn eip1559(nonce: u64, to: TxKind, value: U256, input: Bytes) -> TxEip1559 {
    TxEip1559 {
        chain_id: DEV_CHAIN_ID,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to,
        value,
        access_list: AccessList::default(),
        input,
    }
}

/// Seals `txs` into the next block and checks that each ended as meant (`succeeds`), so that a
/// gas limit a fork's costs outgrow stops the history, naming the transaction.
fn build_checked(
    builder: &BlockBuilder<'_>,
    db: &Database,
    (txs, senders): (Vec<TxEnvelope>, &[Address]),
    kind: &'static str,
    succeeds: bool,
) -> Result<(), DevError> {
    let number = builder.build(txs, senders)?.header.number;
    let receipts = db.begin_read()?.receipts(number)?.ok_or(DevError::MissingBlock(number))?;
    match receipts.iter().position(|r| r.status() != succeeds) {
        Some(index) => Err(DevError::UnexpectedOutcome {
            block: number,
            index,
            kind,
            expected_success: succeeds,
        }),
        None => Ok(()),
    }
}

/// Builds the sample history on a freshly initialised dev datadir (head must be 0).
/// Returns the number of blocks built (0 if the datadir already has blocks).
pub fn build_sample_history(db: &Database, spec: &ChainSpec) -> Result<u64, DevError> {
    if db.begin_read()?.head()? != Some(0) {
        return Ok(0);
    }
    let signers = dev_signers();
    let [s0, s1, s2] = signers.as_slice() else {
        return Err(DevError::Sign("dev keys did not parse".into()));
    };
    let (a0, a1, a2) = (s0.address(), s1.address(), s2.address());
    let builder = BlockBuilder::new(db, spec);
    let build = |txs: Vec<TxEnvelope>, senders: &[Address], kind: &'static str| {
        build_checked(&builder, db, (txs, senders), kind, true)
    };
    // Every gas limit below, times AMSTERDAM_GAS_FACTOR when the history reaches Amsterdam.
    let genesis_time = spec.genesis_header().timestamp;
    let last_time = genesis_time.saturating_add(HISTORY_BLOCKS * super::BLOCK_TIME);
    let factor =
        if spec.is_amsterdam_active_at_timestamp(last_time) { AMSTERDAM_GAS_FACTOR } else { 1 };
    let gas = |osaka: u64| osaka * factor;
    let eip1559 = |nonce: u64, to: TxKind, value: U256, input: Bytes| {
        eip1559(nonce, to, value, input).gas(gas(200_000))
    };
    let eth = U256::from(10u64).pow(U256::from(18u64));
    let mut nonces = [0u64; 3];
    let mut next = |i: usize| {
        let n = nonces[i];
        nonces[i] += 1;
        n
    };

    // Block 1: account 0 deploys Counter (type 2, contract creation).
    let init = Bytes::from(
        hex::decode(format!("{COUNTER_INIT}{COUNTER_RUNTIME}"))
            .map_err(|e| DevError::Sign(e.to_string()))?,
    );
    let deploy = sign(s0, eip1559(next(0), TxKind::Create, U256::ZERO, init))?;
    build(vec![deploy], &[a0], "deploy Counter")?;

    // Block 2: a legacy EIP-155 transfer and an access-list (type 1) transfer.
    let legacy = sign(
        s1,
        TxLegacy {
            chain_id: Some(DEV_CHAIN_ID),
            nonce: next(1),
            gas_price: 10 * GWEI,
            gas_limit: gas(21_000),
            to: TxKind::Call(a2),
            value: eth,
            input: Bytes::new(),
        },
    )?;
    let access = sign(
        s2,
        TxEip2930 {
            chain_id: DEV_CHAIN_ID,
            nonce: next(2),
            gas_price: 10 * GWEI,
            gas_limit: gas(30_000),
            to: TxKind::Call(a0),
            value: eth / U256::from(2u64),
            access_list: AccessList(vec![AccessListItem {
                address: COUNTER,
                storage_keys: vec![Default::default()],
            }]),
            input: Bytes::new(),
        },
    )?;
    build(vec![legacy, access], &[a1, a2], "transfer")?;

    let c = sample_contracts();
    let word = |a: Address| format!("{:0>64}", hex::encode(a));
    let calldata = |s: String| -> Result<Bytes, DevError> {
        hex::decode(s).map(Bytes::from).map_err(|e| DevError::Sign(e.to_string()))
    };

    // Block 3: account 0 deploys Token with a supply of 1,000,000 × 10^18.
    let supply = U256::from(1_000_000u64) * eth;
    let token = calldata(format!("{}{:064x}", &TOKEN_INIT[2..], supply))?;
    build(
        vec![sign(s0, eip1559(next(0), TxKind::Create, U256::ZERO, token).gas(gas(1_000_000)))?],
        &[a0],
        "deploy Token",
    )?;

    // Block 4: account 0 deploys Stamp and Prober.
    let stamp = sign(
        s0,
        eip1559(next(0), TxKind::Create, U256::ZERO, calldata(STAMP_INIT[2..].into())?)
            .gas(gas(1_000_000)),
    )?;
    let prober = sign(
        s0,
        eip1559(next(0), TxKind::Create, U256::ZERO, calldata(PROBER_INIT[2..].into())?)
            .gas(gas(1_000_000)),
    )?;
    build(vec![stamp, prober], &[a0, a0], "deploy Stamp and Prober")?;

    // Block 5: Token.transfer(account 1, 1000) — a Transfer log.
    let transfer = calldata(format!("a9059cbb{}{:064x}", word(a1), 1000))?;
    build(
        vec![sign(s0, eip1559(next(0), TxKind::Call(c.token), U256::ZERO, transfer))?],
        &[a0],
        "Token.transfer",
    )?;

    // Block 6: Prober.probe(token, stamp, account 1) — nested CALL, STATICCALL, DELEGATECALL.
    let probe =
        calldata(format!("{PROBE_SELECTOR}{}{}{}", word(c.token), word(c.stamp), word(a1)))?;
    build(
        vec![sign(s1, eip1559(next(1), TxKind::Call(c.prober), U256::ZERO, probe))?],
        &[a1],
        "Prober.probe",
    )?;

    // Block 7: Prober.fail() reverts (included with status 0). Block 8: Ephemeral is created
    // with 1 gwei and self-destructs in its constructor.
    let fail = sign(
        s2,
        eip1559(next(2), TxKind::Call(c.prober), U256::ZERO, calldata(FAIL_SELECTOR.into())?),
    )?;
    build_checked(&builder, db, (vec![fail], &[a2]), "Prober.fail", false)?;
    let ephemeral = calldata(EPHEMERAL_INIT[2..].into())?;
    let ephemeral = sign(s2, eip1559(next(2), TxKind::Create, GWEI_U256, ephemeral))?;
    build(vec![ephemeral], &[a2], "create Ephemeral")?;

    // Block 9: a blob transaction (type 3) carrying one versioned hash (no sidecar is needed
    // to execute it).
    let mut versioned = alloy_primitives::keccak256(b"loupe sample blob");
    versioned.0[0] = 1;
    let blob = TxEip4844 {
        chain_id: DEV_CHAIN_ID,
        nonce: next(1),
        gas_limit: gas(21_000),
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to: a2,
        value: U256::from(7u64),
        access_list: AccessList::default(),
        blob_versioned_hashes: vec![versioned],
        max_fee_per_blob_gas: 10 * GWEI,
        input: Bytes::new(),
    };
    let sig =
        s1.sign_hash_sync(&blob.signature_hash()).map_err(|e| DevError::Sign(e.to_string()))?;
    let blob: Signed<TxEip4844Variant> = blob.into_signed(sig).into();
    build(vec![TxEnvelope::Eip4844(blob)], &[a1], "blob transfer")?;

    // Block 10: account 2 delegates its code to Counter (EIP-7702, type 4, sent by account 0),
    // and the same transaction calls account 2, running Counter's code on account 2's storage.
    let auth =
        Authorization { chain_id: U256::from(DEV_CHAIN_ID), address: COUNTER, nonce: next(2) };
    let auth_sig =
        s2.sign_hash_sync(&auth.signature_hash()).map_err(|e| DevError::Sign(e.to_string()))?;
    let setcode = TxEip7702 {
        chain_id: DEV_CHAIN_ID,
        nonce: next(0),
        gas_limit: gas(200_000),
        max_fee_per_gas: 100 * GWEI,
        max_priority_fee_per_gas: GWEI,
        to: a2,
        value: U256::ZERO,
        access_list: AccessList::default(),
        authorization_list: vec![auth.into_signed(auth_sig)],
        input: Bytes::new(),
    };
    build(vec![sign(s0, setcode)?], &[a0], "set code")?;

    // Blocks 11..=20: account 0 increments Counter; account 1 pays a fresh address.
    for b in 11..=HISTORY_BLOCKS {
        let call = sign(s0, eip1559(next(0), TxKind::Call(COUNTER), U256::ZERO, Bytes::new()))?;
        let mut fresh = [0u8; 20];
        fresh[18..].copy_from_slice(&(b as u16).to_be_bytes());
        fresh[0] = 0xde;
        let pay = sign(
            s1,
            eip1559(
                next(1),
                TxKind::Call(Address::from(fresh)),
                U256::from(b) * GWEI_U256,
                Bytes::new(),
            ),
        )?;
        build(vec![call, pay], &[a0, a1], "Counter call and payment")?;
    }
    Ok(HISTORY_BLOCKS)
}

const GWEI_U256: U256 = U256::from_limbs([1_000_000_000, 0, 0, 0]);
