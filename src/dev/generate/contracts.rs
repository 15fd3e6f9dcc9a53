//! The contracts a generated chain uses: fixed genesis addresses, their code (hand-assembled,
//! or the sample `Token` compiled from `contracts/Sample.sol`) and the gas their calls cost.

use alloy_primitives::{Address, B256, Bytes, U256, address, b256, hex, keccak256};

use crate::dev::DevError;
use crate::dev::contracts::TOKEN_INIT;

/// The ERC-20 token (the sample `Token`: `transfer(address,uint256)` with a `Transfer` log;
/// balances in the Solidity mapping at slot 0, total supply at slot 1).
pub const TOKEN: Address = address!("0x6c6f757065000000000000000000000000000001");
/// The x·y=k pool (see [`POOL_RUNTIME_HEAD`]).
pub const POOL: Address = address!("0x6c6f757065000000000000000000000000000002");
/// The storage filler (see [`SCRATCH_RUNTIME`]): sets slots and clears them for refunds.
pub const SCRATCH: Address = address!("0x6c6f757065000000000000000000000000000003");
/// The counter EIP-7702 authorities delegate to (the dev chain's hand-assembled `Counter`).
pub const COUNTER: Address = address!("0x6c6f757065000000000000000000000000000004");
/// The big contract (only with `--contract-slots M`): [`BIG_RUNTIME`] with `M` storage slots
/// set at genesis (see [`big_slot`](super::big_slot)), which the blocks update, clear and add
/// to.
pub const BIG: Address = address!("0x6c6f757065000000000000000000000000000005");

/// keccak256("Transfer(address,address,uint256)"), the ERC-20 `Transfer` topic.
pub const TRANSFER_TOPIC: B256 =
    b256!("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef");

/// Selector of `transfer(address,uint256)`.
pub const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// Selector of `swap(uint256,bool)` (the pool does not check it; it reads the words after it).
pub fn swap_selector() -> [u8; 4] {
    selector("swap(uint256,bool)")
}

/// Selector of `fill(uint256,uint256,uint256)` (not checked by the filler either).
pub fn fill_selector() -> [u8; 4] {
    selector("fill(uint256,uint256,uint256)")
}

/// The pool's `Swap(address,bool,uint256,uint256)` log topic (topic 1 is the caller; the data
/// is the direction, the amount in and the amount out).
pub fn swap_topic() -> B256 {
    keccak256("Swap(address,bool,uint256,uint256)")
}

fn selector(signature: &str) -> [u8; 4] {
    let h = keccak256(signature);
    [h[0], h[1], h[2], h[3]]
}

/// Pool runtime up to `CALLER`, before `PUSH32 <Swap topic>` (hand-assembled; 91 bytes in
/// all).
/// `swap(amountIn, zeroForOne)`: `d` is the reserve slot paid into (0 or 1), `o = d ^ 1` the
/// one paid out of; `out = y·in / (x + in)`, so x·y stays (at least) k.
///
/// ```text
/// 00 6024 35        PUSH1 0x24 CALLDATALOAD     [dir]
/// 03 15 15          ISZERO ISZERO               [d]            d = dir != 0
/// 05 80 6001 18     DUP1 PUSH1 1 XOR            [o d]
/// 09 81 54          DUP2 SLOAD                  [x o d]        x = reserve in
/// 0b 81 54          DUP2 SLOAD                  [y x o d]      y = reserve out
/// 0d 6004 35        PUSH1 4 CALLDATALOAD        [in y x o d]
/// 10 82 81 01       DUP3 DUP2 ADD               [X in y x o d] X = x + in
/// 13 80 82 84 02    DUP1 DUP3 DUP5 MUL          [y·in X X in y x o d]
/// 17 04             DIV                         [out X in y x o d]
/// 18 90 86 55       SWAP1 DUP7 SSTORE           [out in y x o d]   slot d = X
/// 1b 80 83 03       DUP1 DUP4 SUB               [y-out out in y x o d]
/// 1e 85 55          DUP6 SSTORE                 [out in y x o d]   slot o = y - out
/// 20 80 6040 52     DUP1 PUSH1 0x40 MSTORE      mem[64] = out
/// 24 81 6020 52     DUP2 PUSH1 0x20 MSTORE      mem[32] = in
/// 28 85 6000 52     DUP6 PUSH1 0 MSTORE         mem[0] = d
/// 2c 33             CALLER
/// 2d 7f <topic>     PUSH32 Swap topic
/// 4e 6060 6000 a2   PUSH1 0x60 PUSH1 0 LOG2     Swap(caller; d, in, out)
/// 53 6000 52        PUSH1 0 MSTORE              mem[0] = out
/// 56 6020 6000 f3   RETURN(0, 32)
/// ```
pub const POOL_RUNTIME_HEAD: &str =
    "602435151580600118815481546004358281018082840204908655808303855580604052816020528560005233";
/// Pool runtime after the topic.
pub const POOL_RUNTIME_TAIL: &str = "60606000a260005260206000f3";

/// The pool runtime with its `Swap` topic.
pub fn pool_runtime() -> Result<Bytes, DevError> {
    let mut code = hex_bytes(POOL_RUNTIME_HEAD)?.to_vec();
    code.push(0x7f); // PUSH32

    code.extend_from_slice(swap_topic().as_slice());
    code.extend_from_slice(&hex_bytes(POOL_RUNTIME_TAIL)?);
    Ok(code.into())
}

/// Storage filler runtime (hand-assembled, 31 bytes). `fill(start, count, value)` writes
/// `value` to slots `start .. start + count`; a value of 0 clears them (and earns refunds).
///
/// ```text
/// 00 6024 35        PUSH1 0x24 CALLDATALOAD     [count]
/// 03 6004 35        PUSH1 4 CALLDATALOAD        [start count]
/// 06 80 91 01 90    DUP1 SWAP2 ADD SWAP1        [i=start end]
/// 0a 5b             JUMPDEST                    loop:
/// 0b 81 81 10 15    DUP2 DUP2 LT ISZERO         [i>=end i end]
/// 0f 601d 57        PUSH1 0x1d JUMPI            done if i >= end
/// 12 6044 35        PUSH1 0x44 CALLDATALOAD     [value i end]
/// 15 81 55          DUP2 SSTORE                 slot i = value
/// 17 6001 01        PUSH1 1 ADD                 [i+1 end]
/// 1a 600a 56        PUSH1 0x0a JUMP
/// 1d 5b 00          JUMPDEST STOP               done:
/// ```
pub const SCRATCH_RUNTIME: &str = "602435600435809101905b81811015601d576044358155600101600a565b00";

/// Big contract runtime (hand-assembled, 26 bytes): the calldata is a packed list of
/// (slot, value) word pairs, and each `value` is written to its `slot` in order (a value of 0
/// clears it). No selector.
///
/// ```text
/// 00 6000           PUSH1 0                     [i=0]
/// 02 5b             JUMPDEST                    loop:
/// 03 36 81 10 15    CALLDATASIZE DUP2 LT ISZERO [i>=size i]
/// 07 6018 57        PUSH1 0x18 JUMPI            done if i >= size
/// 0a 80 6020 01 35  DUP1 PUSH1 0x20 ADD CALLDATALOAD  [value i]
/// 0f 81 35          DUP2 CALLDATALOAD           [slot value i]
/// 11 55             SSTORE                      slot = value
/// 12 6040 01        PUSH1 0x40 ADD              [i+64]
/// 15 6002 56        PUSH1 0x02 JUMP
/// 18 5b 00          JUMPDEST STOP               done:
/// ```
pub const BIG_RUNTIME: &str = "60005b3681101560185780602001358135556040016002565b00";

/// Init code that self-destructs in its constructor, sending any value back to its creator:
/// `CALLER SELFDESTRUCT` (hand-assembled). EIP-6780 deletes it, since it dies in the
/// transaction that created it.
pub const SELFDESTRUCT_INIT: &str = "33ff";

/// Creation code of the sample `Token` (constructor argument: the supply, appended).
pub fn token_init() -> Result<Bytes, DevError> {
    hex_bytes(TOKEN_INIT)
}

/// The sample `Token`'s runtime, cut from its creation code: the constructor ends with
/// `PUSH2 0x0266 DUP1 PUSH2 0x0099 PUSH0 CODECOPY PUSH0 RETURN`, so the runtime is the 0x266
/// bytes at offset 0x99.
pub fn token_runtime() -> Result<Bytes, DevError> {
    let init = token_init()?;
    init.get(0x99..0x99 + 0x266)
        .map(Bytes::copy_from_slice)
        .ok_or_else(|| DevError::Config("Token creation code is shorter than expected".into()))
}

/// The storage slot of `balanceOf[holder]` in `Token` (Solidity mapping at slot 0).
pub fn token_balance_slot(holder: Address) -> B256 {
    let mut buf = [0u8; 64];
    buf[12..32].copy_from_slice(holder.as_slice());
    keccak256(buf)
}

/// Creation code of a `Counter` (the dev chain's): `CODECOPY(0, 11, 18); RETURN(0, 18)` then the
/// runtime.
pub fn counter_init() -> Result<Bytes, DevError> {
    hex_bytes(&format!("{}{}", crate::dev::COUNTER_INIT, crate::dev::COUNTER_RUNTIME))
}

/// The `Counter` runtime.
pub fn counter_runtime() -> Result<Bytes, DevError> {
    hex_bytes(crate::dev::COUNTER_RUNTIME)
}

/// Decodes hex (with or without `0x`).
pub(crate) fn hex_bytes(s: &str) -> Result<Bytes, DevError> {
    hex::decode(s).map(Bytes::from).map_err(|e| DevError::Config(format!("bad bytecode hex: {e}")))
}

/// A 32-byte big-endian word.
pub(crate) fn word(v: U256) -> [u8; 32] {
    v.to_be_bytes()
}

/// An address as a 32-byte ABI word.
pub(crate) fn address_word(a: Address) -> [u8; 32] {
    let mut w = [0u8; 32];
    w[12..].copy_from_slice(a.as_slice());
    w
}

/// Execution gas (beyond the intrinsic cost) of the calls and creations, upper bounds derived
/// from the listings above and, for the compiled `Token`, measured (with headroom); the
/// generator checks every receipt, so a bound that is too low stops it with an error.
pub(crate) mod gas {
    /// Pool swap: two cold SLOADs (2,100 each), two warm SSTOREs of non-zero slots (2,900 each),
    /// LOG2 with 96 bytes (1,893), 3-word memory (9) and 41 cheap opcodes.
    pub(crate) const SWAP: u64 = 12_031;
    /// Filler: fixed part (prologue 24 + final test 26 + JUMPDEST/STOP 1).
    pub(crate) const FILL_FIXED: u64 = 51;
    /// Filler: per slot, the loop (52) plus a cold SSTORE of zero to non-zero (22,100).
    pub(crate) const FILL_SET_PER_SLOT: u64 = 52 + 22_100;
    /// Filler: per slot, the loop (52) plus a cold SSTORE of non-zero to zero (5,000; refunds
    /// 4,800, at most a fifth of the gas used).
    pub(crate) const FILL_CLEAR_PER_SLOT: u64 = 52 + 5_000;
    /// Big contract: fixed part (prologue 3 + final test 24 + two JUMPDESTs 2; STOP is free).
    pub(crate) const BIG_FIXED: u64 = 29;
    /// Big contract: per (slot, value) pair, the loop without its SSTORE (test 25, two
    /// CALLDATALOADs 18, advance 6, jump back 11).
    pub(crate) const BIG_PER_PAIR: u64 = 60;

    /// An SSTORE that is the transaction's first write of its slot (EIP-2200/2929/3529): 2,100
    /// more if the slot is cold; then 100 for zero to zero, 20,000 for zero to non-zero, and
    /// 2,900 from non-zero (100 if the value does not change: the bound is an upper one). A
    /// non-zero to zero write also refunds 4,800.
    pub(crate) const fn first_sstore(was_zero: bool, is_zero: bool, warm: bool) -> u64 {
        let cold = if warm { 0 } else { 2_100 };
        cold + match (was_zero, is_zero) {
            (true, true) => 100,
            (true, false) => 20_000,
            (false, _) => 2_900,
        }
    }

    /// `Token.transfer` to an address that holds none yet (a zero to non-zero SSTORE).
    pub(crate) const TOKEN_TRANSFER_NEW: u64 = 29_912;
    /// `Token.transfer` to an address that holds some already.
    pub(crate) const TOKEN_TRANSFER_EXISTING: u64 = 12_812;
    /// `Token.transfer` of more than the sender holds (reverts early).
    pub(crate) const TOKEN_TRANSFER_FAIL: u64 = 2_639;
    /// `Token` creation: the constructor plus 200 gas per runtime byte (0x266 bytes).
    pub(crate) const TOKEN_DEPLOY: u64 = 169_190;
    /// `Counter` creation: CODECOPY prologue (24) and 18 code bytes at 200 gas.
    pub(crate) const COUNTER_DEPLOY: u64 = 24 + 18 * 200;
    /// Self-destructing creation: CALLER (2) and SELFDESTRUCT to a warm, existing account
    /// (5,000).
    pub(crate) const SELFDESTRUCT: u64 = 5_002;
    /// Call of a delegated (EIP-7702) account running `Counter`: first increment of its slot.
    pub(crate) const DELEGATE_FIRST: u64 = 22_130;
    /// Call of a delegated account running `Counter`: later increments.
    pub(crate) const DELEGATE_AGAIN: u64 = 5_030;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_match_the_code() {
        let pool = pool_runtime().unwrap();
        assert_eq!(pool.len(), 91);
        assert_eq!(pool[0x2c], 0x33);
        assert_eq!(pool[0x2d], 0x7f);
        assert_eq!(&pool[0x2e..0x4e], swap_topic().as_slice());
        assert_eq!(pool[0x52], 0xa2);
        let scratch = hex_bytes(SCRATCH_RUNTIME).unwrap();
        assert_eq!(scratch.len(), 31);
        assert_eq!(scratch[0x0a], 0x5b);
        assert_eq!(scratch[0x1d], 0x5b);
        let big = hex_bytes(BIG_RUNTIME).unwrap();
        assert_eq!(big.len(), 26);
        assert_eq!((big[0x02], big[0x08], big[0x16], big[0x18]), (0x5b, 0x18, 0x02, 0x5b));
        assert_eq!((big[0x11], big[0x19]), (0x55, 0x00));
        assert_eq!(
            keccak256("Transfer(address,address,uint256)"),
            TRANSFER_TOPIC,
            "Transfer topic"
        );
        assert_eq!(selector("transfer(address,uint256)"), TRANSFER_SELECTOR);
        let runtime = token_runtime().unwrap();
        assert_eq!(runtime.len(), 0x266);
        assert_eq!(&runtime[..6], &hex::decode("608060405234").unwrap()[..]);
    }
}
