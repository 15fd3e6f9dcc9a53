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

/// `trace_call` params for the three benchmark calls from `funded` (a funded sender of the
/// chain; [`FUNDED`] on the fixture chain), with `["trace","stateDiff"]` at `block`.
pub(crate) fn params_from(block: &str, funded: &str) -> [(&'static str, String); 3] {
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
    ]
}
