//! The transaction mix: what each generated block holds, drawn from the seed, with every
//! sender's nonce, token balance and the contracts' state tracked locally so each transaction
//! does what it is meant to (or fails on purpose), and gas limits tight enough to fill blocks.
//!
//! With a big contract ([`BIG`]), [`BIG_SHARE`]% of the transactions write to it; the choice
//! is one extra draw from the random stream made only then, so without one the stream, and
//! the chain, are exactly what they are without the option.

use crate::dev::sample::sign;
use alloy_consensus::{
    SignableTransaction, Signed, TxEip1559, TxEip2930, TxEip4844, TxEip4844Variant, TxEip7702,
    TxEnvelope, TxLegacy,
};
use alloy_eips::eip2930::{AccessList, AccessListItem};
use alloy_eips::eip7702::{Authorization, SignedAuthorization};
use alloy_primitives::{Address, B256, Bytes, TxKind, U256, keccak256};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;

use super::contracts::{
    BIG, COUNTER, POOL, SCRATCH, SELFDESTRUCT_INIT, TOKEN, TRANSFER_SELECTOR, address_word,
    counter_init, fill_selector, gas, hex_bytes, swap_selector, token_balance_slot, token_init,
    word,
};
use super::genesis::{ETHER, GENERATED_CHAIN_ID, big_slot, funded_account, sender_token_balance};
use super::rng::Rng;
use crate::dev::DevError;

/// What a generated transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// ETH to an address never seen before.
    EthToNew,
    /// ETH to a funded genesis account.
    EthToExisting,
    /// `Token.transfer` (a `Transfer` log).
    TokenTransfer,
    /// `Token.transfer` of more than the sender holds: reverts, on purpose.
    TokenTransferFail,
    /// A swap on the pool.
    Swap,
    /// Sets fresh storage slots of the filler.
    StorageSet,
    /// Clears slots set earlier (refunds).
    StorageClear,
    /// Creates a `Token`.
    DeployToken,
    /// Creates a `Counter`.
    DeployCounter,
    /// Creates a contract (with value) that self-destructs in its constructor.
    SelfDestruct,
    /// EIP-7702: another sender delegates to `Counter`, and the transaction calls it.
    Delegate,
    /// EIP-4844: an ETH transfer carrying blob versioned hashes.
    Blob,
    /// Writes to the big contract (only with one): updates 8 random slots set at genesis to
    /// new non-zero values, clears 1–3 more and sets 1–3 new ones.
    BigStorageWrite,
}

impl Action {
    /// Every action, in display order.
    pub const ALL: [Self; 13] = [
        Self::EthToNew,
        Self::EthToExisting,
        Self::TokenTransfer,
        Self::TokenTransferFail,
        Self::Swap,
        Self::StorageSet,
        Self::StorageClear,
        Self::DeployToken,
        Self::DeployCounter,
        Self::SelfDestruct,
        Self::Delegate,
        Self::Blob,
        Self::BigStorageWrite,
    ];

    /// A short name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::EthToNew => "eth-to-new",
            Self::EthToExisting => "eth-to-existing",
            Self::TokenTransfer => "erc20-transfer",
            Self::TokenTransferFail => "erc20-transfer-revert",
            Self::Swap => "swap",
            Self::StorageSet => "storage-set",
            Self::StorageClear => "storage-clear",
            Self::DeployToken => "create-token",
            Self::DeployCounter => "create-counter",
            Self::SelfDestruct => "create-selfdestruct",
            Self::Delegate => "eip7702-delegate",
            Self::Blob => "blob",
            Self::BigStorageWrite => "big-storage-write",
        }
    }

    /// Share of the mix, in percent (they sum to 100). [`Action::BigStorageWrite`] has none:
    /// it is drawn apart, before the others (see [`BIG_SHARE`]).
    const fn weight(self) -> u64 {
        match self {
            Self::EthToNew | Self::EthToExisting | Self::Swap => 14,
            Self::TokenTransfer => 29,
            Self::TokenTransferFail | Self::DeployToken => 1,
            Self::StorageSet => 8,
            Self::StorageClear => 5,
            Self::DeployCounter | Self::SelfDestruct | Self::Blob => 3,
            Self::Delegate => 4,
            Self::BigStorageWrite => 0,
        }
    }

    /// Index into [`Action::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|a| *a == self).unwrap_or(0)
    }
}

/// Share of the transactions, in percent, that write to the big contract when there is one.
pub(crate) const BIG_SHARE: u64 = 15;

/// Genesis slots of the big contract each [`Action::BigStorageWrite`] updates (at most all of
/// them).
pub(crate) const BIG_UPDATES: u64 = 8;

/// Fees of the block being built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fees {
    /// Its base fee.
    pub(crate) base_fee: u64,
    /// Its blob base fee.
    pub(crate) blob_fee: u128,
}

/// One transaction of a block, signed, with what it was meant to do.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The signed transaction.
    pub(crate) tx: TxEnvelope,
    /// Its sender.
    pub(crate) sender: Address,
    /// What it does.
    pub(crate) action: Action,
    /// Whether it should succeed.
    pub(crate) succeeds: bool,
}

/// The envelope type a draft is sent in.
#[derive(Debug, Clone)]
enum Envelope {
    Legacy,
    AccessList(AccessList),
    Eip1559,
    Blob(Vec<B256>),
    SetCode { authority: usize },
}

/// State changes a draft makes once it is included.
#[derive(Debug, Clone)]
enum Effect {
    None,
    Fresh,
    Token {
        to: Address,
        amount: U256,
        fresh: bool,
    },
    SetRange {
        count: u64,
    },
    ClearRange {
        index: usize,
    },
    Delegate {
        authority: usize,
    },
    /// Big-contract genesis slots (by index) set non-zero and cleared, and new slots added.
    Big {
        updated: Vec<u64>,
        cleared: Vec<u64>,
        added: u64,
    },
}

/// A transaction drawn but not yet included.
#[derive(Debug, Clone)]
struct Draft {
    sender: usize,
    action: Action,
    to: TxKind,
    value: U256,
    input: Bytes,
    envelope: Envelope,
    exec_gas: u64,
    succeeds: bool,
    effect: Effect,
}

/// Most blob transactions in one block (each with one or two blobs), below the blob target
/// so that blob usage alone does not drive the blob fee up.
const MAX_BLOB_TXS: usize = 2;

/// Calldata cost (EIP-2028) and EIP-7623 tokens of `data`.
fn calldata(data: &[u8]) -> (u64, u64) {
    let zeros = data.iter().filter(|b| **b == 0).count() as u64;
    let nonzero = data.len() as u64 - zeros;
    (zeros * 4 + nonzero * 16, zeros + nonzero * 4)
}

impl Draft {
    /// A safe gas limit: the intrinsic cost (Prague rules, with the EIP-7623 floor) plus the
    /// execution bound plus 2%.
    fn gas_limit(&self) -> u64 {
        let (data_cost, tokens) = calldata(&self.input);
        let mut intrinsic = 21_000 + data_cost;
        if self.to.is_create() {
            intrinsic += 32_000 + 2 * (self.input.len() as u64).div_ceil(32);
        }
        match &self.envelope {
            Envelope::AccessList(list) => {
                for item in &list.0 {
                    intrinsic += 2_400 + 1_900 * item.storage_keys.len() as u64;
                }
            }
            Envelope::SetCode { .. } => intrinsic += 25_000,
            Envelope::Legacy | Envelope::Eip1559 | Envelope::Blob(_) => {}
        }
        let floor = 21_000 + 10 * tokens;
        (intrinsic + self.exec_gas + self.exec_gas / 50).max(floor)
    }
}

/// The mix's memory of the chain: nonces, token holders, filler slots, delegations.
#[derive(Debug)]
pub(crate) struct Mix {
    seed: u64,
    accounts: u64,
    signers: Vec<PrivateKeySigner>,
    addresses: Vec<Address>,
    nonces: Vec<u64>,
    /// Token balances of every holder (senders and the addresses they paid).
    token_balances: std::collections::HashMap<Address, U256>,
    /// Holders in the order they first received tokens (for picking one at random).
    holders: Vec<Address>,
    /// `Counter` value in the storage of each sender that delegated to it.
    delegated_counter: Vec<u64>,
    /// Filler ranges set and not cleared yet: (first slot, count).
    live_ranges: Vec<(u64, u64)>,
    next_slot: u64,
    /// Genesis slots of the big contract (none: no big contract).
    big_slots: u64,
    /// Index ([`big_slot`]) of the next new big-contract slot.
    big_next: u64,
    /// Big-contract genesis slots cleared and not set again (the others are all non-zero).
    big_cleared: std::collections::HashSet<u64>,
    fresh: u64,
    blobs: u64,
    rng: Rng,
    token_init: Bytes,
    counter_init: Bytes,
    selfdestruct_init: Bytes,
}

impl Mix {
    /// A mix for `seed` over `accounts` funded accounts and a big contract of `big_slots`
    /// genesis slots (none if 0), signing with `signers`.
    pub(crate) fn new(
        seed: u64,
        accounts: u64,
        big_slots: u64,
        signers: Vec<PrivateKeySigner>,
    ) -> Result<Self, DevError> {
        if signers.is_empty() {
            return Err(DevError::Config("no senders".into()));
        }
        let addresses: Vec<Address> = signers.iter().map(|s| s.address()).collect();
        let token_balances = addresses.iter().map(|a| (*a, sender_token_balance())).collect();
        Ok(Self {
            seed,
            accounts,
            nonces: vec![0; signers.len()],
            delegated_counter: vec![0; signers.len()],
            holders: addresses.clone(),
            addresses,
            signers,
            token_balances,
            live_ranges: Vec::new(),
            next_slot: 0,
            big_slots,
            big_next: big_slots,
            big_cleared: std::collections::HashSet::new(),
            fresh: 0,
            blobs: 0,
            rng: Rng::new(seed, "mix"),
            token_init: token_init()?,
            counter_init: counter_init()?,
            selfdestruct_init: hex_bytes(SELFDESTRUCT_INIT)?,
        })
    }

    /// The transactions of the next block: drawn until the next one would not fit in `budget`
    /// gas (counting every transaction at its gas limit) or `max_txs` are drawn.
    pub(crate) fn block(
        &mut self,
        fees: Fees,
        budget: u64,
        max_txs: usize,
    ) -> Result<Vec<Planned>, DevError> {
        let mut out = Vec::new();
        let mut used = 0u64;
        let mut blob_txs = 0usize;
        while out.len() < max_txs {
            let draft = self.draw(blob_txs < MAX_BLOB_TXS);
            let limit = draft.gas_limit();
            if used + limit > budget {
                break;
            }
            used += limit;
            if matches!(draft.envelope, Envelope::Blob(_)) {
                blob_txs += 1;
            }
            out.push(self.include(draft, limit, fees)?);
        }
        Ok(out)
    }

    fn fresh_address(&self) -> Address {
        let mut buf = Vec::with_capacity(21);
        buf.extend_from_slice(&self.seed.to_be_bytes());
        buf.extend_from_slice(b"fresh");
        buf.extend_from_slice(&self.fresh.to_be_bytes());
        Address::from_slice(&keccak256(&buf)[12..])
    }

    fn existing_account(&mut self) -> Option<Address> {
        (self.accounts > 0).then(|| funded_account(self.seed, self.rng.below(self.accounts)))
    }

    /// Legacy, access-list or EIP-1559 with the given percentages for the first two.
    fn plain_envelope(&mut self, legacy: u64, access: u64, list: AccessList) -> Envelope {
        let r = self.rng.below(100);
        if r < legacy {
            Envelope::Legacy
        } else if r < legacy + access {
            Envelope::AccessList(list)
        } else {
            Envelope::Eip1559
        }
    }

    fn pick_action(&mut self, blob_allowed: bool) -> Action {
        // Drawn only with a big contract (see the module docs).
        if self.big_slots > 0 && self.rng.below(100) < BIG_SHARE {
            return Action::BigStorageWrite;
        }
        let mut r = self.rng.below(100);
        let mut action = Action::EthToNew;
        for a in Action::ALL {
            if r < a.weight() {
                action = a;
                break;
            }
            r -= a.weight();
        }
        match action {
            Action::StorageClear if self.live_ranges.is_empty() => Action::StorageSet,
            Action::Blob if !blob_allowed => Action::EthToExisting,
            Action::Delegate if self.signers.len() < 2 => Action::EthToNew,
            a => a,
        }
    }

    /// Draws one transaction (changing nothing but the random stream).
    fn draw(&mut self, blob_allowed: bool) -> Draft {
        let action = self.pick_action(blob_allowed);
        let sender = self.rng.index(self.signers.len());
        let from = self.addresses[sender];
        let mut d = Draft {
            sender,
            action,
            to: TxKind::Create,
            value: U256::ZERO,
            input: Bytes::new(),
            envelope: Envelope::Eip1559,
            exec_gas: 0,
            succeeds: true,
            effect: Effect::None,
        };
        let small_eth =
            |rng: &mut Rng| U256::from(rng.range(1, 1_000)) * ETHER / U256::from(10_000);
        match action {
            Action::EthToNew | Action::EthToExisting | Action::Blob => {
                let existing =
                    if action == Action::EthToNew { None } else { self.existing_account() };
                let to = match existing {
                    Some(a) => a,
                    None => {
                        d.effect = Effect::Fresh;
                        self.fresh_address()
                    }
                };
                d.to = TxKind::Call(to);
                d.value = small_eth(&mut self.rng);
                d.envelope = if action == Action::Blob {
                    let n = self.rng.range(1, 2);
                    Envelope::Blob(
                        (0..n)
                            .map(|i| {
                                let mut buf = Vec::with_capacity(28);
                                buf.extend_from_slice(&self.seed.to_be_bytes());
                                buf.extend_from_slice(b"blob");
                                buf.extend_from_slice(&(self.blobs + i).to_be_bytes());
                                let mut h = keccak256(&buf);
                                h.0[0] = 1; // VERSIONED_HASH_VERSION_KZG
                                h
                            })
                            .collect(),
                    )
                } else {
                    let list =
                        AccessList(vec![AccessListItem { address: to, storage_keys: vec![] }]);
                    self.plain_envelope(20, 10, list)
                };
            }
            Action::TokenTransfer | Action::TokenTransferFail => {
                let balance = self.token_balances.get(&from).copied().unwrap_or_default();
                let n = self.addresses.len();
                let r = self.rng.below(100);
                let to = if r < 35 {
                    None
                } else if r < 60 {
                    self.existing_account()
                } else if r < 85 && n > 1 {
                    Some(self.addresses[(sender + 1 + self.rng.index(n - 1)) % n])
                } else {
                    Some(self.holders[self.rng.index(self.holders.len())])
                };
                let (to, fresh) = match to {
                    Some(to) if to != from => (to, false),
                    _ => (self.fresh_address(), true),
                };
                let held = self.token_balances.get(&to).copied().unwrap_or_default();
                let mut amount = U256::from(self.rng.range(1, 10_000)) * ETHER / U256::from(1_000);
                // A sender with (almost) nothing left can only fail, on purpose.
                if action == Action::TokenTransferFail || balance <= U256::from(1) {
                    d.action = Action::TokenTransferFail;
                    amount = balance + U256::from(self.rng.range(1, 1_000_000));
                    d.succeeds = false;
                    d.exec_gas = gas::TOKEN_TRANSFER_FAIL;
                    d.effect = if fresh { Effect::Fresh } else { Effect::None };
                } else {
                    if amount >= balance {
                        amount = balance / U256::from(2);
                    }
                    d.exec_gas = if held.is_zero() {
                        gas::TOKEN_TRANSFER_NEW
                    } else {
                        gas::TOKEN_TRANSFER_EXISTING
                    };
                    d.effect = Effect::Token { to, amount, fresh };
                }
                let mut input = Vec::with_capacity(68);
                input.extend_from_slice(&TRANSFER_SELECTOR);
                input.extend_from_slice(&address_word(to));
                input.extend_from_slice(&word(amount));
                d.input = input.into();
                d.to = TxKind::Call(TOKEN);
                let list = AccessList(vec![AccessListItem {
                    address: TOKEN,
                    storage_keys: vec![token_balance_slot(from), token_balance_slot(to)],
                }]);
                d.envelope = self.plain_envelope(15, 10, list);
            }
            Action::Swap => {
                let amount = U256::from(self.rng.range(1, 1_000_000)) * ETHER / U256::from(1_000);
                let dir = U256::from(self.rng.below(2));
                let mut input = Vec::with_capacity(68);
                input.extend_from_slice(&swap_selector());
                input.extend_from_slice(&word(amount));
                input.extend_from_slice(&word(dir));
                d.input = input.into();
                d.to = TxKind::Call(POOL);
                d.exec_gas = gas::SWAP;
                let list = AccessList(vec![AccessListItem {
                    address: POOL,
                    storage_keys: vec![B256::ZERO, B256::from(U256::from(1))],
                }]);
                d.envelope = self.plain_envelope(10, 10, list);
            }
            Action::StorageSet | Action::StorageClear => {
                let (start, count, value) = if action == Action::StorageSet {
                    let count = self.rng.range(1, 16);
                    d.effect = Effect::SetRange { count };
                    d.exec_gas = gas::FILL_FIXED + count * gas::FILL_SET_PER_SLOT;
                    (self.next_slot, count, self.rng.range(1, u64::MAX))
                } else {
                    let index = self.rng.index(self.live_ranges.len());
                    let (start, count) = self.live_ranges[index];
                    d.effect = Effect::ClearRange { index };
                    d.exec_gas = gas::FILL_FIXED + count * gas::FILL_CLEAR_PER_SLOT;
                    (start, count, 0)
                };
                let mut input = Vec::with_capacity(100);
                input.extend_from_slice(&fill_selector());
                for w in [start, count, value] {
                    input.extend_from_slice(&word(U256::from(w)));
                }
                d.input = input.into();
                d.to = TxKind::Call(SCRATCH);
                d.envelope = self.plain_envelope(10, 0, AccessList::default());
            }
            Action::DeployToken | Action::DeployCounter | Action::SelfDestruct => {
                let code = match action {
                    Action::DeployToken => {
                        let supply = U256::from(self.rng.range(1, 1_000_000_000)) * ETHER;
                        let mut init = self.token_init.to_vec();
                        init.extend_from_slice(&word(supply));
                        d.exec_gas = gas::TOKEN_DEPLOY;
                        init.into()
                    }
                    Action::DeployCounter => {
                        d.exec_gas = gas::COUNTER_DEPLOY;
                        self.counter_init.clone()
                    }
                    _ => {
                        d.value = small_eth(&mut self.rng);
                        d.exec_gas = gas::SELFDESTRUCT;
                        self.selfdestruct_init.clone()
                    }
                };
                d.input = code;
                d.envelope = self.plain_envelope(20, 0, AccessList::default());
            }
            Action::BigStorageWrite => self.big_write(&mut d),
            Action::Delegate => {
                let n = self.signers.len();
                let authority = (sender + 1 + self.rng.index(n - 1)) % n;
                d.to = TxKind::Call(self.addresses[authority]);
                d.exec_gas = if self.delegated_counter[authority] == 0 {
                    gas::DELEGATE_FIRST
                } else {
                    gas::DELEGATE_AGAIN
                };
                d.envelope = Envelope::SetCode { authority };
                d.effect = Effect::Delegate { authority };
            }
        }
        d
    }

    /// Fills in `d`, a write to the big contract: (slot, value) pairs for [`BIG_UPDATES`]
    /// distinct random genesis slots with new non-zero values, then 1–3 more with zero, then
    /// 1–3 new slots with non-zero values. A new slot comes last, so the last SSTORE costs at
    /// least 20,000 and none runs into the 2,300 gas SSTORE needs left (EIP-2200).
    fn big_write(&mut self, d: &mut Draft) {
        let m = self.big_slots;
        let updates = BIG_UPDATES.min(m);
        let clears = self.rng.range(1, 3).min(m - updates);
        let added = self.rng.range(1, 3);
        let mut picked: Vec<u64> = Vec::with_capacity((updates + clears) as usize);
        while (picked.len() as u64) < updates + clears {
            let i = self.rng.below(m);
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        // (slot, zero before, new value)
        let mut writes: Vec<(B256, bool, U256)> = Vec::with_capacity(picked.len() + 3);
        for (k, &i) in picked.iter().enumerate() {
            let value = if (k as u64) < updates {
                U256::from(self.rng.range(1, u64::MAX))
            } else {
                U256::ZERO
            };
            writes.push((big_slot(self.seed, i), self.big_cleared.contains(&i), value));
        }
        for j in 0..added {
            let value = U256::from(self.rng.range(1, u64::MAX));
            writes.push((big_slot(self.seed, self.big_next + j), true, value));
        }
        let mut input = Vec::with_capacity(64 * writes.len());
        for (slot, _, value) in &writes {
            input.extend_from_slice(slot.as_slice());
            input.extend_from_slice(&word(*value));
        }
        let keys = writes.iter().map(|w| w.0).collect();
        let list = AccessList(vec![AccessListItem { address: BIG, storage_keys: keys }]);
        d.envelope = self.plain_envelope(10, 10, list);
        let warm = matches!(d.envelope, Envelope::AccessList(_));
        d.exec_gas = gas::BIG_FIXED
            + writes
                .iter()
                .map(|(_, was_zero, value)| {
                    gas::BIG_PER_PAIR + gas::first_sstore(*was_zero, value.is_zero(), warm)
                })
                .sum::<u64>();
        d.input = input.into();
        d.to = TxKind::Call(BIG);
        let cleared = picked.split_off(updates as usize);
        d.effect = Effect::Big { updated: picked, cleared, added };
    }

    /// Signs `d` with the next nonce and applies its effects.
    fn include(&mut self, d: Draft, gas_limit: u64, fees: Fees) -> Result<Planned, DevError> {
        let nonce = self.nonces[d.sender];
        self.nonces[d.sender] += 1;
        let base = u128::from(fees.base_fee);
        let tip = u128::from(self.rng.range(1, 200)) * 10_000_000;
        let max_fee = 2 * base + tip;
        let signer = &self.signers[d.sender];
        let to = d.to;
        let tx = match d.envelope {
            Envelope::Legacy => sign(
                signer,
                TxLegacy {
                    chain_id: Some(GENERATED_CHAIN_ID),
                    nonce,
                    gas_price: max_fee,
                    gas_limit,
                    to,
                    value: d.value,
                    input: d.input,
                },
            )?,
            Envelope::AccessList(access_list) => sign(
                signer,
                TxEip2930 {
                    chain_id: GENERATED_CHAIN_ID,
                    nonce,
                    gas_price: max_fee,
                    gas_limit,
                    to,
                    value: d.value,
                    access_list,
                    input: d.input,
                },
            )?,
            Envelope::Eip1559 => sign(
                signer,
                TxEip1559 {
                    chain_id: GENERATED_CHAIN_ID,
                    nonce,
                    gas_limit,
                    max_fee_per_gas: max_fee,
                    max_priority_fee_per_gas: tip,
                    to,
                    value: d.value,
                    access_list: AccessList::default(),
                    input: d.input,
                },
            )?,
            Envelope::Blob(hashes) => {
                self.blobs += hashes.len() as u64;
                let TxKind::Call(to) = to else {
                    return Err(DevError::Config("a blob transaction cannot create".into()));
                };
                let tx = TxEip4844 {
                    chain_id: GENERATED_CHAIN_ID,
                    nonce,
                    gas_limit,
                    max_fee_per_gas: max_fee,
                    max_priority_fee_per_gas: tip,
                    to,
                    value: d.value,
                    access_list: AccessList::default(),
                    blob_versioned_hashes: hashes,
                    max_fee_per_blob_gas: 2 * fees.blob_fee + 1_000_000_000,
                    input: d.input,
                };
                let sig = signer
                    .sign_hash_sync(&tx.signature_hash())
                    .map_err(|e| DevError::Sign(e.to_string()))?;
                let signed: Signed<TxEip4844Variant> = tx.into_signed(sig).into();
                TxEnvelope::Eip4844(signed)
            }
            Envelope::SetCode { authority } => {
                let TxKind::Call(to) = to else {
                    return Err(DevError::Config("a set-code transaction cannot create".into()));
                };
                let auth = Authorization {
                    chain_id: U256::from(GENERATED_CHAIN_ID),
                    address: COUNTER,
                    nonce: self.nonces[authority],
                };
                self.nonces[authority] += 1;
                let auth_sig = self.signers[authority]
                    .sign_hash_sync(&auth.signature_hash())
                    .map_err(|e| DevError::Sign(e.to_string()))?;
                let auth: SignedAuthorization = auth.into_signed(auth_sig);
                sign(
                    &self.signers[d.sender],
                    TxEip7702 {
                        chain_id: GENERATED_CHAIN_ID,
                        nonce,
                        gas_limit,
                        max_fee_per_gas: max_fee,
                        max_priority_fee_per_gas: tip,
                        to,
                        value: d.value,
                        access_list: AccessList::default(),
                        authorization_list: vec![auth],
                        input: d.input,
                    },
                )?
            }
        };
        let from = self.addresses[d.sender];
        match d.effect {
            Effect::None => {}
            Effect::Fresh => self.fresh += 1,
            Effect::Token { to, amount, fresh } => {
                if fresh {
                    self.fresh += 1;
                }
                if let Some(b) = self.token_balances.get_mut(&from) {
                    *b -= amount;
                }
                let held = self.token_balances.entry(to).or_default();
                if held.is_zero() {
                    self.holders.push(to);
                }
                *held += amount;
            }
            Effect::SetRange { count } => {
                self.live_ranges.push((self.next_slot, count));
                self.next_slot += count;
            }
            Effect::ClearRange { index } => {
                self.live_ranges.swap_remove(index);
            }
            Effect::Delegate { authority } => self.delegated_counter[authority] += 1,
            Effect::Big { updated, cleared, added } => {
                for i in updated {
                    self.big_cleared.remove(&i);
                }
                self.big_cleared.extend(cleared);
                self.big_next += added;
            }
        }
        Ok(Planned { tx, sender: from, action: d.action, succeeds: d.succeeds })
    }
}
