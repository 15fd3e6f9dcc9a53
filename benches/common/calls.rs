//! The benchmark calls, shared by the criterion bench (`benches/trace_call.rs`) and the HTTP
//! load script (`benches/http.sh`, through `examples/bench_calls.rs`).

/// A funded account of the execution-apis genesis.
pub(crate) const FUNDED: &str = "0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2";

/// Address of the hand-assembled storage writer (installed by state override).
pub(crate) const STORAGE_WRITER: &str = "0x00000000000000000000000000000000000b0001";
/// Address of the hand-assembled recursive caller (installed by state override).
pub(crate) const RECURSIVE: &str = "0x00000000000000000000000000000000000b0002";

/// 20 SSTOREs of fresh slots: `PUSH1 v PUSH1 k SSTORE` for k = 0..20, then STOP.
pub(crate) fn storage_writer_code() -> String {
    let mut code = String::from("0x");
    for k in 0u8..20 {
        code.push_str(&format!("60{:02x}60{:02x}55", k + 1, k));
    }
    code.push_str("00");
    code
}

/// Calls itself `n` levels deep, `n` = the first calldata word:
/// `n=CALLDATALOAD(0); if n==0 stop; mem[0]=n-1; CALL(gas, self, 0, 0, 32, 0, 0)`.
pub(crate) const RECURSIVE_CODE: &str =
    "0x6000358015601d57600190036000526000600060206000600030 5af1505b00";

/// The fixture chain's emit contract (genesis alloc): stores a counter under the hash of its
/// call data, bumps the counter and logs it (`tests/trace_golden.rs` disassembles it).
pub(crate) const EMIT: &str = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";

/// Init code that creates a contract whose init code creates one, `depth` frames in all
/// (the innermost deploys empty code): each level is `PUSH2 len DUP1 PUSH2 17 PUSH1 0 CODECOPY
/// PUSH1 0 PUSH1 0 CREATE POP STOP` (17 bytes) followed by the next level's init code.
pub(crate) fn nested_create_code(depth: u32) -> String {
    let mut code = String::from("00");
    for _ in 1..depth {
        let len = code.len() / 2;
        code = format!("61{len:04x}8061001160003960006000f05000{code}");
    }
    format!("0x{code}")
}

/// `trace_call` params for the benchmark calls from `funded` (a funded sender of the chain;
/// [`FUNDED`] on the fixture chain), with `["trace","stateDiff"]` at `block`: a transfer, 20
/// storage writes, 16 nested calls, the emit contract (two slots and a log) and a create
/// nested 5 frames deep.
pub(crate) fn params_from(block: &str, funded: &str) -> [(&'static str, String); 5] {
    let recursive = RECURSIVE_CODE.replace(' ', "");
    [
        (
            "transfer",
            format!(
                r#"[{{"from":"{funded}","to":"0x00000000000000000000000000000000000c0ffe","value":"0x1"}},["trace","stateDiff"],"{block}"]"#
            ),
        ),
        (
            "storage",
            format!(
                r#"[{{"from":"{funded}","to":"{STORAGE_WRITER}"}},["trace","stateDiff"],"{block}",{{"{STORAGE_WRITER}":{{"code":"{}"}}}}]"#,
                storage_writer_code()
            ),
        ),
        (
            "nested",
            format!(
                r#"[{{"from":"{funded}","to":"{RECURSIVE}","input":"0x{:064x}"}},["trace","stateDiff"],"{block}",{{"{RECURSIVE}":{{"code":"{recursive}"}}}}]"#,
                16
            ),
        ),
        (
            "emit",
            format!(
                r#"[{{"from":"{funded}","to":"{EMIT}","input":"0x12345678"}},["trace","stateDiff"],"{block}"]"#
            ),
        ),
        (
            "nested_create",
            format!(
                r#"[{{"from":"{funded}","input":"{}"}},["trace","stateDiff"],"{block}"]"#,
                nested_create_code(5)
            ),
        ),
    ]
}
