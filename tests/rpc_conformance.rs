//! execution-apis conformance: plays the `.io` fixture exchanges of the methods loupe serves
//! against an in-process node over the imported fixture chain.
//!
//! Rules (see `../shared/fixtures/execution-apis/README.md`):
//! - `result` responses must equal the fixture exactly (as JSON values: key order is free);
//! - an expected `error` needs an error with the same `code` (and the same `data` when the fixture
//!   has one); messages are geth's wording, so a different message is reported, not failed;
//! - `speconly` cases only check that `result` vs `error` presence matches.
//!
//! There is no expected-failure list: every case of every listed method must pass.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// One `.io` file: its comments and its request/response pairs.
#[derive(Debug)]
struct Case {
    name: String,
    speconly: bool,
    exchanges: Vec<(String, Value)>,
}

fn parse_io(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let name = format!(
        "{}/{}",
        path.parent().and_then(|p| p.file_name()).unwrap().to_string_lossy(),
        path.file_name().unwrap().to_string_lossy()
    );
    let mut speconly = false;
    let mut exchanges = Vec::new();
    let mut pending: Option<String> = None;
    for (no, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix("//") {
            speconly |= c.contains("speconly");
        } else if let Some(req) = line.strip_prefix(">>") {
            if pending.is_some() {
                return Err(format!("{name}:{}: two requests in a row", no + 1));
            }
            pending = Some(req.trim().to_string());
        } else if let Some(resp) = line.strip_prefix("<<") {
            let req = pending
                .take()
                .ok_or_else(|| format!("{name}:{}: response without request", no + 1))?;
            let v: Value = serde_json::from_str(resp.trim())
                .map_err(|e| format!("{name}:{}: bad expected JSON: {e}", no + 1))?;
            exchanges.push((req, v));
        } else {
            return Err(format!("{name}:{}: unrecognised line {line:?}", no + 1));
        }
    }
    if pending.is_some() {
        return Err(format!("{name}: request without response"));
    }
    if exchanges.is_empty() {
        return Err(format!("{name}: no exchanges"));
    }
    Ok(Case { name, speconly, exchanges })
}

/// The `.io` files of one method folder, sorted; `None` when the folder does not exist.
fn cases_of(fixtures: &Path, method: &str) -> Option<Vec<PathBuf>> {
    let dir = fixtures.join(method);
    let rd = std::fs::read_dir(&dir).ok()?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "io"))
        .collect();
    files.sort();
    Some(files)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 { format!("{}…({} chars)", &s[..160], s.len()) } else { s }
}

/// The first path where `expected` and `actual` differ, with both values there.
fn first_diff(path: &str, expected: &Value, actual: &Value) -> Option<String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let mut keys: Vec<&String> = e.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}.{k}");
                match (e.get(k), a.get(k)) {
                    (Some(ev), Some(av)) => {
                        if let Some(d) = first_diff(&p, ev, av) {
                            return Some(d);
                        }
                    }
                    (Some(ev), None) => {
                        return Some(format!("{p}: missing (expected {})", short(ev)));
                    }
                    (None, Some(av)) => return Some(format!("{p}: unexpected {}", short(av))),
                    (None, None) => unreachable!(),
                }
            }
            None
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                if let Some(d) = first_diff(&format!("{path}[{i}]"), ev, av) {
                    return Some(d);
                }
            }
            (e.len() != a.len())
                .then(|| format!("{path}: array length {} (expected {})", a.len(), e.len()))
        }
        _ if expected == actual => None,
        _ => Some(format!("{path}: expected {}, got {}", short(expected), short(actual))),
    }
}

/// Checks one response against the fixture; `Err` is the failure, notes are soft differences.
fn check(
    speconly: bool,
    expected: &Value,
    actual: &Value,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let has = |v: &Value, k: &str| v.get(k).is_some();
    if speconly {
        if has(expected, "result") != has(actual, "result")
            || has(expected, "error") != has(actual, "error")
        {
            return Err(format!(
                "speconly: expected {} response, got {}",
                if has(expected, "error") { "an error" } else { "a result" },
                short(actual)
            ));
        }
        return Ok(());
    }
    if let Some(exp_err) = expected.get("error") {
        let Some(act_err) = actual.get("error") else {
            return Err(format!("expected error {}, got {}", short(exp_err), short(actual)));
        };
        // Everything but the error message must match exactly: jsonrpc, id, code, data.
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(e) = v.get_mut("error").and_then(Value::as_object_mut) {
                e.remove("message");
            }
            v
        };
        if let Some(d) = first_diff("$", &strip(expected), &strip(actual)) {
            return Err(d);
        }
        if exp_err.get("message") != act_err.get("message") {
            notes.push(format!(
                "message differs (not failed): expected {}, got {}",
                exp_err.get("message").map_or_else(|| "none".into(), short),
                act_err.get("message").map_or_else(|| "none".into(), short)
            ));
        }
        return Ok(());
    }
    match first_diff("$", expected, actual) {
        None => Ok(()),
        Some(d) => Err(d),
    }
}

/// Outcome of one method folder.
#[derive(Debug, Default)]
struct Tally {
    passed: usize,
    failed: Vec<String>,
    notes: Vec<String>,
    missing_folder: bool,
}

fn play_method(node: &support::Node, fixtures: &Path, method: &str) -> Tally {
    let mut t = Tally::default();
    let Some(files) = cases_of(fixtures, method) else {
        t.missing_folder = true;
        return t;
    };
    for file in files {
        let case = match parse_io(&file) {
            Ok(c) => c,
            Err(e) => {
                t.failed.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let mut failure = None;
        let mut notes = Vec::new();
        for (i, (req, expected)) in case.exchanges.iter().enumerate() {
            let (status, body) = node.post_raw(req.clone());
            let actual: Value = match serde_json::from_str(&body) {
                Ok(v) => v,
                Err(e) => {
                    failure =
                        Some(format!("exchange {i}: HTTP {status}, body not JSON ({e}): {body:?}"));
                    break;
                }
            };
            if status != 200 {
                failure = Some(format!("exchange {i}: HTTP {status}: {body}"));
                break;
            }
            if let Err(d) = check(case.speconly, expected, &actual, &mut notes) {
                failure = Some(format!("exchange {i}: {d}"));
                break;
            }
        }
        t.notes.extend(notes.into_iter().map(|n| format!("{}: {n}", case.name)));
        match failure {
            None => t.passed += 1,
            Some(f) => t.failed.push(format!("{}: {f}", case.name)),
        }
    }
    t
}

fn report(method: &str, t: &Tally, out: &mut String) {
    let extra = if t.missing_folder { " (no fixture folder)" } else { "" };
    writeln!(out, "{method}: {} passed, {} failed{extra}", t.passed, t.failed.len()).unwrap();
    for f in &t.failed {
        writeln!(out, "  FAIL {f}").unwrap();
    }
    for n in &t.notes {
        writeln!(out, "  note {n}").unwrap();
    }
}

fn run_methods(methods: &[&str]) {
    let Some(node) = support::Node::start(|_| {}) else { return };
    let fixtures = support::fixtures().unwrap();
    let mut out = String::new();
    let (mut passed, mut failed) = (0, 0);
    for m in methods {
        let t = play_method(&node, &fixtures, m);
        report(m, &t, &mut out);
        passed += t.passed;
        failed += t.failed.len();
    }
    if methods.len() > 1 {
        writeln!(out, "conformance: {passed} passed, {failed} failed").unwrap();
    }
    print!("{out}");
    assert!(failed == 0, "{failed} conformance case(s) failed:\n{out}");
}

/// All methods with the per-method lines and the overall `conformance: N passed, M failed` line.
#[test]
fn conformance_all() {
    run_methods(METHODS);
}

/// Declares the method folders played by this runner: `METHODS`, and one test per folder (for
/// nextest granularity) under `method::`.
macro_rules! methods {
    ($($name:ident),* $(,)?) => {
        const METHODS: &[&str] = &[$(stringify!($name)),*];

        #[allow(non_snake_case)]
        mod method {
            $(
                #[test]
                fn $name() {
                    super::run_methods(&[stringify!($name)]);
                }
            )*
        }
    };
}

methods!(
    eth_getTransactionByBlockNumberAndIndex,
    eth_getTransactionByHash,
    eth_getTransactionByBlockHashAndIndex,
    eth_chainId,
    eth_blockNumber,
    net_version,
    web3_clientVersion,
    eth_syncing,
    eth_getBlockByNumber,
    eth_getBlockByHash,
    eth_getBlockTransactionCountByNumber,
    eth_getBlockTransactionCountByHash,
    eth_getTransactionReceipt,
    eth_getBlockReceipts,
    eth_getBalance,
    eth_getCode,
    eth_getStorageAt,
    eth_getTransactionCount,
    eth_call,
    eth_getProof,
    eth_feeHistory,
    eth_baseFee,
    eth_blobBaseFee,
    debug_getRawHeader,
    debug_getRawBlock,
    eth_getLogs,
    eth_simulateV1,
    debug_traceTransaction,
    debug_traceBlockByNumber,
    debug_traceBlockByHash,
    eth_estimateGas,
    eth_createAccessList,
    eth_getStorageValues,
    eth_config,
    eth_capabilities,
    debug_getRawReceipts,
    debug_getRawTransaction,
);

/// Every successful `eth_call` fixture, replayed as `trace_call` with `["trace"]`: the trace's
/// `output` equals the `eth_call` result.
#[test]
fn trace_call_output_matches_eth_call_fixtures() {
    let Some(node) = support::Node::start(|_| {}) else { return };
    let fixtures = support::fixtures().unwrap();
    let files = cases_of(&fixtures, "eth_call").expect("eth_call fixture folder");
    let (mut checked, mut failures) = (0, Vec::new());
    for file in files {
        let case = parse_io(&file).unwrap();
        for (req, expected) in &case.exchanges {
            let Some(result) = expected.get("result") else { continue };
            let req: Value = serde_json::from_str(req).unwrap();
            let params = req["params"].as_array().unwrap();
            let call = params[0].clone();
            let block = params.get(1).cloned().unwrap_or_else(|| json!("latest"));
            let mut trace_params = vec![call, json!(["trace"]), block];
            trace_params.extend(params.iter().skip(2).cloned());
            checked += 1;
            match node.call("trace_call", Value::Array(trace_params)) {
                Ok(r) if r.get("output") == Some(result) => {}
                Ok(r) => failures.push(format!(
                    "{}: output {} != eth_call result {}",
                    case.name,
                    r.get("output").map_or_else(|| "missing".into(), short),
                    short(result)
                )),
                Err(e) => failures.push(format!("{}: trace_call error {e}", case.name)),
            }
        }
    }
    println!(
        "trace_call vs eth_call: {} passed, {} failed",
        checked - failures.len(),
        failures.len()
    );
    assert!(checked > 0, "no successful eth_call fixture found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
