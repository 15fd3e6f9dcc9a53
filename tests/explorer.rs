//! The explorer (issue 43), against `loupe` started as a process: its pages in a real browser
//! (Debian's Chromium, headless, driven through ChromeDriver) compared with the node's own
//! JSON-RPC answers; its status codes and headers; and no explorer unless asked for.
//!
//! The browser comes from Debian's packages `chromium` and `chromium-driver`; when they are
//! missing and the test runs as root it installs them with apt-get. Under CI=true a missing
//! browser fails the test; elsewhere it prints why and passes. Screenshots are written to
//! `$LOUPE_ARTIFACTS`, by default `target/explorer-artifacts/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/served.rs"]
mod served;
use served::served_url;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy_primitives::U256;
use alloy_sol_types::SolError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_loupe");
const COUNTER: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const ACCOUNT0: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
/// The revert string of the escaping check.
const PAYLOAD: &str = "<img src=x onerror=alert(1)>";

/// A `loupe` process serving on a free port; killed when dropped.
struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    base: String,
    /// What it printed, stdout and stderr.
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Whether it printed a line containing `text`, waiting for it up to `wait`.
    fn printed_within(&self, text: &str, wait: Duration) -> bool {
        let started = Instant::now();
        loop {
            if self.lines.lock().unwrap().iter().any(|l| l.contains(text)) {
                return true;
            }
            if started.elapsed() > wait {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it printed a line containing `text`, within a few seconds.
    fn printed(&self, text: &str) -> bool {
        self.printed_within(text, Duration::from_secs(10))
    }
}

/// Starts `loupe <args>` and waits until it serves (`dev` prints the URL, every command logs
/// it).
fn start(args: &[&str]) -> Served {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run loupe");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let streams: [Box<dyn Read + Send>; 2] =
        [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
    for stream in streams {
        let (lines, tx) = (lines.clone(), tx.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let Some(base) = served_url(&line) {
                    let _ = tx.send(base);
                }
                lines.lock().unwrap().push(line);
            }
        });
    }
    let started = Instant::now();
    let base = loop {
        if let Ok(base) = rx.recv_timeout(Duration::from_millis(100)) {
            break base;
        }
        if let Some(status) = child.try_wait().unwrap() {
            std::thread::sleep(Duration::from_millis(200)); // the rest of its output
            panic!("loupe {args:?} exited with {status}: {:?}", lines.lock().unwrap());
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("loupe {args:?} did not start serving: {:?}", lines.lock().unwrap());
        }
    };
    Served { child, base, lines }
}

/// `loupe dev` on a new datadir, with `extra` flags.
fn dev(dir: &Path, extra: &[&str]) -> Served {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["dev", "--datadir", dir, "--http.port", "0", "--log.filter", "info"];
    args.extend_from_slice(extra);
    start(&args)
}

async fn rpc(http: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let answer: Value = http.post(base).json(&body).send().await.unwrap().json().await.unwrap();
    answer.get("result").cloned().unwrap_or_else(|| panic!("{method}: {answer}"))
}

/// The hash of the first transaction of block `n`.
async fn first_tx(http: &reqwest::Client, base: &str, n: u64) -> String {
    let block = rpc(http, base, "eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await;
    block["transactions"][0].as_str().unwrap().to_string()
}

/// A hex quantity or word as a number.
fn hex_number(s: &str) -> U256 {
    let digits = s.trim().trim_start_matches("0x");
    U256::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
        .unwrap_or_else(|e| panic!("{s:?} is not hex: {e}"))
}

/// Init code that reverts with `Error(reason)`: the ABI encoding stored 32 bytes at a time,
/// then `REVERT`.
fn reverting_init_code(reason: &str) -> String {
    let data = alloy_sol_types::Revert::from(reason).abi_encode();
    assert!(data.len() < 256);
    let mut code = Vec::new();
    for (i, chunk) in data.chunks(32).enumerate() {
        let mut word = [0u8; 32];
        word[..chunk.len()].copy_from_slice(chunk);
        code.push(0x7f); // PUSH32 word
        code.extend_from_slice(&word);
        code.extend_from_slice(&[0x60, (i * 32) as u8, 0x52]); // PUSH1 offset, MSTORE
    }
    code.extend_from_slice(&[0x60, data.len() as u8, 0x60, 0x00, 0xfd]); // PUSH1 len, PUSH1 0, REVERT
    format!("0x{}", alloy_primitives::hex::encode(code))
}

/// The most init code a creation may carry since Shanghai (EIP-3860), Osaka's limit too.
const MAX_INIT_CODE: usize = 49_152;

/// The code the init code of [`returning_init_code`] deploys.
const WORD: [u8; 32] = *b"loupe: init code of 49,152 bytes";

/// Init code of `len` bytes that returns `word` as the contract's code: `PUSH32 word, PUSH1 0,
/// MSTORE, PUSH1 32, PUSH1 0, RETURN`, then zeros up to `len` (never reached).
fn returning_init_code(len: usize, word: &[u8; 32]) -> String {
    let mut code = vec![0x7f];
    code.extend_from_slice(word);
    code.extend_from_slice(&[0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00, 0xf3]);
    code.resize(len, 0);
    format!("0x{}", alloy_primitives::hex::encode(code))
}

/// Where screenshots go.
fn artifacts() -> PathBuf {
    let dir = std::env::var_os("LOUPE_ARTIFACTS").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
            .join("explorer-artifacts")
    });
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the browser's screenshot as `name` and checks it shows something: at least two
/// colours, and at least 1 % of the pixels (and 2,000) not of the most common one.
async fn screenshot(c: &Client, name: &str) {
    let bytes = c.screenshot().await.unwrap();
    let path = artifacts().join(name);
    std::fs::write(&path, &bytes).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(&bytes)).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let samples = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
    let mut counts = std::collections::HashMap::<&[u8], usize>::new();
    for pixel in buf[..info.buffer_size()].chunks_exact(samples) {
        *counts.entry(pixel).or_default() += 1;
    }
    let total: usize = counts.values().sum();
    let background = counts.values().copied().max().unwrap_or(0);
    let others = total - background;
    assert!(
        counts.len() >= 2 && others >= 2_000 && others * 100 >= total,
        "{} looks blank: {} colours, {others} of {total} pixels not background",
        path.display(),
        counts.len()
    );
}

/// A program on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Chromium and ChromeDriver, installed from Debian's packages if missing (as root).
fn browser_programs() -> Result<(PathBuf, PathBuf), String> {
    let find = || Some((which("chromium")?, which("chromedriver")?));
    if let Some(found) = find() {
        return Ok(found);
    }
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if root && which("apt-get").is_some() {
        eprintln!("installing chromium and chromium-driver with apt-get");
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(["chromium", "chromium-driver", "fonts-liberation"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    find().ok_or_else(|| {
        "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
            .to_string()
    })
}

/// ChromeDriver and a headless Chromium session; the driver is killed when dropped.
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A browser session, or why there is none (outside CI only).
async fn browser() -> Option<Browser> {
    let (chromium, chromedriver) = match browser_programs() {
        Ok(found) => found,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("{why}"),
        Err(why) => {
            eprintln!("skipping the browser checks: {why}");
            return None;
        }
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let driver = Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run chromedriver");
    let profile = tempfile::tempdir().unwrap();
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1280,1400",
    ]
    .into_iter()
    .map(String::from)
    .chain([format!("--user-data-dir={}", profile.path().display())])
    .collect::<Vec<_>>();
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), json!({"binary": chromium, "args": args}));
    // An alert stays open (and is seen) rather than being dismissed by the next command.
    caps.insert("unhandledPromptBehavior".into(), json!("ignore"));
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(caps);
    let client = loop {
        match builder.connect(&url).await {
            Ok(client) => break client,
            Err(e) if started.elapsed() > Duration::from_secs(30) => {
                panic!("no WebDriver session at {url}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    Some(Browser { client, driver, _profile: profile })
}

/// Every frame row of the page: its path, its parent's path, kind, from, to and gas used, as
/// shown.
const FRAMES: &str = r#"
return Array.from(document.querySelectorAll('details.frame')).map(function (d) {
  var parent = d.parentElement.closest('details.frame');
  var s = d.querySelector(':scope > summary');
  var text = function (sel) { var e = s.querySelector(sel); return e ? e.innerText : null; };
  return { path: d.dataset.path, parent: parent ? parent.dataset.path : null,
           kind: text('.kind'), from: text('.from'), to: text('.to'), gas: text('.gas-used') };
});
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_in_a_browser_show_what_the_methods_answer() {
    let dir = tempfile::tempdir().unwrap();
    let node = dev(dir.path(), &[]);
    let base = node.base.clone();
    let Some(browser) = browser().await else { return };
    let c = &browser.client;
    let http = reqwest::Client::new();

    // Block 6: nested CALL, STATICCALL and DELEGATECALL; one row per frame of trace_transaction.
    let hash6 = first_tx(&http, &base, 6).await;
    let traces = rpc(&http, &base, "trace_transaction", json!([hash6])).await;
    let traces = traces.as_array().unwrap();
    c.goto(&format!("{base}/explorer/tx/{hash6}")).await.unwrap();
    let rows = c.execute(FRAMES, vec![]).await.unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), traces.len(), "one row per frame: {rows:?}");
    let mut kinds = Vec::new();
    for (row, trace) in rows.iter().zip(traces) {
        let address: Vec<String> = trace["traceAddress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap().to_string())
            .collect();
        let parent = (!address.is_empty()).then(|| address[..address.len() - 1].join("."));
        assert_eq!(row["path"], address.join("."), "order: {row} for {trace}");
        assert_eq!(row["parent"].as_str().map(str::to_string), parent, "nesting: {row}");
        let action = &trace["action"];
        let kind = action["callType"].as_str().or_else(|| trace["type"].as_str()).unwrap();
        assert_eq!(row["kind"].as_str().unwrap().to_lowercase(), kind, "{row}");
        kinds.push(kind.to_string());
        assert_eq!(row["from"].as_str().unwrap().to_lowercase(), action["from"], "{row}");
        assert_eq!(row["to"].as_str().unwrap().to_lowercase(), action["to"], "{row}");
        let shown: u64 = row["gas"].as_str().unwrap().replace(',', "").parse().unwrap();
        let used = hex_number(trace["result"]["gasUsed"].as_str().unwrap());
        assert_eq!(U256::from(shown), used, "gas used: {row} for {trace}");
    }
    for kind in ["call", "staticcall", "delegatecall"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} frame in {kinds:?}");
    }
    screenshot(c, "tx-block6.png").await;
    // Collapsing the top frame hides its children, and only them.
    let summaries = c.find_all(Locator::Css("details.frame > summary")).await.unwrap();
    assert!(summaries.iter().skip(1).len() >= 3);
    for s in &summaries {
        assert!(s.is_displayed().await.unwrap());
    }
    // The summary line holds links (the addresses): click its kind, not its middle.
    summaries[0].find(Locator::Css(".kind")).await.unwrap().click().await.unwrap();
    assert!(summaries[0].is_displayed().await.unwrap());
    for s in &summaries[1..] {
        assert!(!s.is_displayed().await.unwrap(), "a child of a collapsed frame is shown");
    }
    screenshot(c, "tx-block6-collapsed.png").await;
    // A phone-sized window: nothing wider than the screen.
    c.set_window_size(412, 915).await.unwrap();
    c.refresh().await.unwrap();
    let fits = c
        .execute("return document.documentElement.scrollWidth <= window.innerWidth", vec![])
        .await
        .unwrap();
    assert_eq!(fits, json!(true), "the transaction page overflows a phone-sized window");
    screenshot(c, "tx-block6-phone.png").await;
    c.set_window_size(1280, 1400).await.unwrap();

    // Block 7: a reverting call shows its revert reason, decoded.
    let hash7 = first_tx(&http, &base, 7).await;
    let replay = rpc(&http, &base, "trace_replayTransaction", json!([hash7, ["trace"]])).await;
    let output = alloy_primitives::hex::decode(replay["output"].as_str().unwrap()).unwrap();
    let reason = alloy_sol_types::Revert::abi_decode(&output).unwrap().reason;
    c.goto(&format!("{base}/explorer/tx/{hash7}")).await.unwrap();
    let frame = c.find(Locator::Css("details.frame > summary .error")).await.unwrap();
    assert_eq!(frame.text().await.unwrap(), format!("reverted: {reason}"));
    let status = c.find(Locator::Css("dl.summary .revert")).await.unwrap();
    assert_eq!(status.text().await.unwrap(), format!("reverted: {reason}"));
    screenshot(c, "tx-block7.png").await;

    // The call form, filled for Counter at block 13: output 4 and slot 0 from 3 to 4.
    c.goto(&format!("{base}/explorer/call")).await.unwrap();
    screenshot(c, "call-form.png").await;
    for (name, value) in [("from", ACCOUNT0), ("to", COUNTER), ("block", "13")] {
        let field = c.find(Locator::Css(&format!("form.call [name={name}]"))).await.unwrap();
        field.send_keys(value).await.unwrap();
    }
    c.find(Locator::Css("form.call button[type=submit]")).await.unwrap().click().await.unwrap();
    after_navigation(c, "section.result").await;
    let url = c.current_url().await.unwrap();
    // Sent by POST and redirected to the call's link (its addresses checksummed).
    let query = url.query().unwrap_or("").to_lowercase();
    assert!(query.contains(&format!("to={COUNTER}")) && query.contains("block=13"), "{url}");
    let call = json!({"from": ACCOUNT0, "to": COUNTER});
    let expected =
        rpc(&http, &base, "trace_call", json!([call, ["trace", "stateDiff"], "0xd"])).await;
    let out = expected["output"].as_str().unwrap();
    let shown = c.find(Locator::Css("section.result .output code")).await.unwrap();
    assert_eq!(shown.text().await.unwrap(), out);
    let decoded = c.find(Locator::Css("section.result .output .decoded")).await.unwrap();
    assert_eq!(decoded.text().await.unwrap(), format!("uint256 {}", hex_number(out)));
    assert_eq!(hex_number(out), U256::from(4));
    let slot0 = format!("0x{}", "0".repeat(64));
    let change = &expected["stateDiff"][COUNTER]["storage"][&slot0]["*"];
    let row = c
        .find(Locator::Css(&format!("tr[data-field=storage][data-slot='{slot0}']")))
        .await
        .unwrap();
    assert_eq!(row.attr("data-address").await.unwrap().unwrap().to_lowercase(), COUNTER);
    let before = row.find(Locator::Css("td.before code")).await.unwrap().text().await.unwrap();
    let after = row.find(Locator::Css("td.after code")).await.unwrap().text().await.unwrap();
    assert_eq!(hex_number(&before), hex_number(change["from"].as_str().unwrap()));
    assert_eq!(hex_number(&after), hex_number(change["to"].as_str().unwrap()));
    assert_eq!((hex_number(&before), hex_number(&after)), (U256::from(3), U256::from(4)));
    screenshot(c, "call-counter-block13.png").await;

    // A revert string that is markup is shown as text: no element made, no script run.
    c.goto(&format!("{base}/explorer/call")).await.unwrap();
    let init = reverting_init_code(PAYLOAD);
    for (name, value) in [("from", ACCOUNT0), ("data", init.as_str())] {
        let field = c.find(Locator::Css(&format!("form.call [name={name}]"))).await.unwrap();
        field.send_keys(value).await.unwrap();
    }
    c.find(Locator::Css("form.call button[type=submit]")).await.unwrap().click().await.unwrap();
    after_navigation(c, "section.result").await;
    match c.get_alert_text().await {
        Err(e) if e.is_no_such_alert() => {}
        other => panic!("a dialog is open: {other:?}"),
    }
    let shown = c.find(Locator::Css("section.result .output .error")).await.unwrap();
    assert_eq!(shown.text().await.unwrap(), format!("reverted: {PAYLOAD}"));
    let frame = c.find(Locator::Css("details.frame > summary .error")).await.unwrap();
    assert_eq!(frame.text().await.unwrap(), format!("reverted: {PAYLOAD}"));
    let made = c
        .execute("return document.querySelectorAll('img, [onerror], [src=x]').length", vec![])
        .await
        .unwrap();
    assert_eq!(made, json!(0), "the revert string made an element");
    screenshot(c, "call-markup-revert.png").await;
    let html = http.get(c.current_url().await.unwrap().as_str()).send().await.unwrap().text().await;
    let html = html.unwrap();
    assert!(html.contains("reverted: &lt;img src=x onerror=alert(1)&gt;"), "{html}");
    assert!(!html.contains(PAYLOAD));

    // Error pages: an unknown hash (404) and a malformed address (400).
    let unknown = format!("0x{}", "ab".repeat(32));
    c.goto(&format!("{base}/explorer/tx/{unknown}")).await.unwrap();
    let h1 = c.find(Locator::Css("main h1")).await.unwrap().text().await.unwrap();
    assert_eq!(h1, "Not found");
    screenshot(c, "error-404.png").await;
    c.goto(&format!("{base}/explorer/address/0x5fbdb")).await.unwrap();
    let h1 = c.find(Locator::Css("main h1")).await.unwrap().text().await.unwrap();
    assert_eq!(h1, "Bad request");
    screenshot(c, "error-400.png").await;

    // The block and address pages and the start page.
    c.goto(&format!("{base}/explorer/block/6")).await.unwrap();
    let tx_link = c.find(Locator::Css("table.txs a.hash")).await.unwrap();
    assert_eq!(tx_link.text().await.unwrap(), hash6);
    screenshot(c, "block6.png").await;
    c.goto(&format!("{base}/explorer/address/{COUNTER}?block=12")).await.unwrap();
    let nonces = c.find_all(Locator::Css("td.nonce")).await.unwrap();
    assert_eq!(nonces.len(), 2);
    screenshot(c, "address-counter.png").await;
    c.goto(&format!("{base}/explorer/")).await.unwrap();
    let search = c.find(Locator::Css("form.search input[name=q]")).await.unwrap();
    search.send_keys(&hash6).await.unwrap();
    c.find(Locator::Css("form.search button")).await.unwrap().click().await.unwrap();
    after_navigation(c, "details.frame").await;
    assert!(c.current_url().await.unwrap().path().ends_with(&hash6));

    browser.client.clone().close().await.unwrap();
}

/// Where an element is and what it shows: its rectangle, the right edge of what shows it (the
/// window, or the scrolling box around a table when that is narrower), whether its text is cut
/// (wider than its box), its text and title.
const BOX: &str = r#"
var e = arguments[0], r = e.getBoundingClientRect(), s = e.closest('.scroll');
var edge = Math.min(window.innerWidth, s ? s.getBoundingClientRect().right : Infinity);
return { left: r.left, right: r.right, width: edge, cut: e.scrollWidth > e.clientWidth,
         text: e.innerText, title: e.getAttribute('title') };
"#;

/// `n` with commas between groups of three digits, as the pages write gas.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Issue 63's defects, in the browser: the head block links to no next block; at 1,280 px a
/// block's addresses and hashes are shown whole, at 390 px cut with the whole value in their
/// tooltip and the status column on screen; the gas bars of a call tree line up, and the top
/// frame's tooltip names the transaction's gas, not a caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_values_the_status_column_the_head_and_the_gas_bars_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let node = dev(dir.path(), &[]);
    let base = node.base.clone();
    let Some(browser) = browser().await else { return };
    let c = &browser.client;
    let http = reqwest::Client::new();

    // The head: a link back, none forward. The block before it links to it.
    let head = hex_number(rpc(&http, &base, "eth_blockNumber", json!([])).await.as_str().unwrap());
    let head: u64 = head.to::<u64>();
    c.goto(&format!("{base}/explorer/block/{head}")).await.unwrap();
    assert!(
        c.find_all(Locator::Css("a[rel=next]")).await.unwrap().is_empty(),
        "a next link on the head"
    );
    let prev = c.find(Locator::Css("a[rel=prev]")).await.unwrap();
    assert!(prev.attr("href").await.unwrap().unwrap().ends_with(&format!("/block/{}", head - 1)));
    c.goto(&format!("{base}/explorer/block/{}", head - 1)).await.unwrap();
    c.find(Locator::Css("a[rel=next]")).await.unwrap().click().await.unwrap();
    after_navigation(c, "main h1").await;
    let h1 = c.find(Locator::Css("main h1")).await.unwrap().text().await.unwrap();
    assert_eq!(h1, format!("Block #{head}"));

    // Block 2: two transfers. At 1,280 px every address and hash of its table whole and on
    // screen, as the node's JSON-RPC answers them.
    let block = rpc(&http, &base, "eth_getBlockByNumber", json!(["0x2", true])).await;
    let receipts = rpc(&http, &base, "eth_getBlockReceipts", json!(["0x2"])).await;
    let txs = block["transactions"].as_array().unwrap();
    assert_eq!(txs.len(), 2);
    c.set_window_size(1280, 1000).await.unwrap();
    c.goto(&format!("{base}/explorer/block/2")).await.unwrap();
    let rows = c.find_all(Locator::Css("table.txs tbody tr")).await.unwrap();
    assert_eq!(rows.len(), txs.len());
    for (row, tx) in rows.iter().zip(txs) {
        let links = row.find_all(Locator::Css("a.addr, a.hash")).await.unwrap();
        let mut shown = Vec::new();
        for link in &links {
            let b = c.execute(BOX, vec![serde_json::to_value(link).unwrap()]).await.unwrap();
            assert_eq!(b["cut"], json!(false), "cut at 1,280 px: {b}");
            assert!(b["left"].as_f64().unwrap() >= 0.0, "off screen: {b}");
            assert!(
                b["right"].as_f64().unwrap() <= b["width"].as_f64().unwrap(),
                "off screen: {b}"
            );
            // Hashes may wrap to a second line: the text without its line breaks.
            shown.push(b["text"].as_str().unwrap().replace('\n', "").to_lowercase());
        }
        let expected: Vec<String> =
            ["hash", "from", "to"].iter().map(|k| tx[*k].as_str().unwrap().to_string()).collect();
        assert_eq!(shown, expected, "block 2's table at 1,280 px");
    }
    screenshot(c, "block2-1280.png").await;

    // At 390 px: addresses cut, each whole in its title; the status column on screen, saying
    // what the receipts say.
    c.set_window_size(390, 844).await.unwrap();
    c.refresh().await.unwrap();
    let width = c.execute("return window.innerWidth", vec![]).await.unwrap();
    assert!(width.as_f64().unwrap() <= 390.0, "the window is {width} px wide");
    let froms =
        c.find_all(Locator::Css("table.txs tbody tr td:nth-child(4) a.addr")).await.unwrap();
    assert_eq!(froms.len(), txs.len());
    for (link, tx) in froms.iter().zip(txs) {
        let b = c.execute(BOX, vec![serde_json::to_value(link).unwrap()]).await.unwrap();
        assert_eq!(b["cut"], json!(true), "not cut at 390 px: {b}");
        assert_eq!(
            b["title"].as_str().map(str::to_lowercase).as_deref(),
            tx["from"].as_str(),
            "{b}"
        );
    }
    let statuses = c.find_all(Locator::Css("table.txs td.status")).await.unwrap();
    assert_eq!(statuses.len(), txs.len());
    for (cell, receipt) in statuses.iter().zip(receipts.as_array().unwrap()) {
        let b = c.execute(BOX, vec![serde_json::to_value(cell).unwrap()]).await.unwrap();
        assert!(b["left"].as_f64().unwrap() >= 0.0, "status off screen at 390 px: {b}");
        assert!(
            b["right"].as_f64().unwrap() <= b["width"].as_f64().unwrap(),
            "status off screen at 390 px: {b}"
        );
        let says = if receipt["status"] == "0x1" { "success" } else { "failed" };
        assert_eq!(b["text"], says, "{b}");
    }
    screenshot(c, "block2-390.png").await;

    // Block 6's call tree at 1,280 px: every gas bar at the same place; the top one relative to
    // the transaction's gas used, the others to their caller's.
    c.set_window_size(1280, 1000).await.unwrap();
    let hash6 = first_tx(&http, &base, 6).await;
    let receipt = rpc(&http, &base, "eth_getTransactionReceipt", json!([hash6])).await;
    let tx_gas: u64 = hex_number(receipt["gasUsed"].as_str().unwrap()).to();
    let traces = rpc(&http, &base, "trace_transaction", json!([hash6])).await;
    let top_gas: u64 = hex_number(traces[0]["result"]["gasUsed"].as_str().unwrap()).to();
    c.goto(&format!("{base}/explorer/tx/{hash6}")).await.unwrap();
    let meters = c.find_all(Locator::Css("details.frame > summary meter")).await.unwrap();
    assert_eq!(meters.len(), traces.as_array().unwrap().len());
    let mut boxes = Vec::new();
    for m in &meters {
        boxes.push(c.execute(BOX, vec![serde_json::to_value(m).unwrap()]).await.unwrap());
    }
    for b in &boxes[1..] {
        for side in ["left", "right"] {
            let (x, x0) = (b[side].as_f64().unwrap(), boxes[0][side].as_f64().unwrap());
            assert!((x - x0).abs() < 1.0, "gas bars do not line up ({side}): {boxes:?}");
        }
        assert!(b["title"].as_str().unwrap().contains("gas its caller used"), "{b}");
    }
    let of = tx_gas.max(top_gas);
    let top = format!(
        "{:.1}% of the {} gas the transaction used",
        top_gas as f64 * 100.0 / of as f64,
        grouped(of)
    );
    assert_eq!(boxes[0]["title"], top.as_str(), "the top frame's bar");
    screenshot(c, "tx-block6-bars.png").await;
    browser.client.clone().close().await.unwrap();
}

/// The call form sent by POST runs the largest init code Osaka allows (49,152 bytes: a URL of
/// it, over 98,000 characters, is more than the server reads) and shows what `trace_call`
/// answers for it; one byte more is refused by EIP-3860's rule, shown beside the form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_form_runs_the_largest_init_code_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let node = dev(dir.path(), &[]);
    let base = node.base.clone();
    let Some(browser) = browser().await else { return };
    let c = &browser.client;
    let http = reqwest::Client::new();
    let init = returning_init_code(MAX_INIT_CODE, &WORD);
    let call = json!({"from": ACCOUNT0, "data": init});
    let expected =
        rpc(&http, &base, "trace_call", json!([call, ["trace", "stateDiff"], "latest"])).await;
    let code = format!("0x{}", alloy_primitives::hex::encode(WORD));
    assert_eq!(expected["output"], code.as_str(), "trace_call of the init code");

    let base = base.as_str();
    let fill = |data: String| async move {
        c.goto(&format!("{base}/explorer/call")).await.unwrap();
        let from = c.find(Locator::Css("form.call [name=from]")).await.unwrap();
        from.send_keys(ACCOUNT0).await.unwrap();
        // 98,306 characters: set, not typed.
        c.execute(
            "document.querySelector('form.call [name=data]').value = arguments[0]",
            vec![json!(data)],
        )
        .await
        .unwrap();
        c.find(Locator::Css("form.call button[type=submit]")).await.unwrap().click().await.unwrap();
    };
    fill(init.clone()).await;
    after_navigation(c, "section.result").await;
    let url = c.current_url().await.unwrap();
    assert_eq!(
        (url.path(), url.query()),
        ("/explorer/call", None),
        "the answer to the POST itself"
    );
    let status = c.find(Locator::Css("section.result dl.summary .ok")).await.unwrap();
    assert_eq!(status.text().await.unwrap(), "success");
    let shown = c.find(Locator::Css("section.result .output code")).await.unwrap();
    assert_eq!(shown.text().await.unwrap(), code);
    let len = c.find(Locator::Css("details.frame > summary .len")).await.unwrap();
    assert_eq!(len.text().await.unwrap(), "49,152 bytes");
    let kind = c.find(Locator::Css("details.frame > summary .kind")).await.unwrap();
    assert_eq!(kind.text().await.unwrap().to_lowercase(), "create");
    c.find(Locator::Css("section.result .no-link")).await.unwrap();
    screenshot(c, "call-init-49152.png").await;

    // One byte over EIP-3860's limit: refused by the rule, not by the transport.
    fill(returning_init_code(MAX_INIT_CODE + 1, &WORD)).await;
    after_navigation(c, "main .problem").await;
    let problem = c.find(Locator::Css("main .problem")).await.unwrap().text().await.unwrap();
    assert!(problem.to_lowercase().contains("init"), "{problem}");
    screenshot(c, "call-init-49153.png").await;
    browser.client.clone().close().await.unwrap();
}

/// `GET path` written on a socket of its own (any length), and the whole answer, read until the
/// server closes the connection.
fn raw_get(base: &str, path: &str) -> String {
    use std::io::Write;
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// GET `path` without following redirects: status, headers, body.
async fn get(base: &str, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build();
    let r = http.unwrap().get(format!("{base}{path}")).send().await.unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_codes_headers_and_search() {
    let dir = tempfile::tempdir().unwrap();
    let node = dev(dir.path(), &[]);
    let base = node.base.clone();
    assert!(node.printed(&format!("Explorer: {base}/explorer/")), "{:?}", node.lines);
    let http = reqwest::Client::new();
    let hash6 = first_tx(&http, &base, 6).await;
    let unknown = format!("0x{}", "ab".repeat(32));
    for (path, status, says) in [
        ("/explorer/".to_string(), 200, "Newest blocks"),
        (format!("/explorer/tx/{hash6}"), 200, "Call tree"),
        (format!("/explorer/tx/{unknown}"), 404, "there is no transaction"),
        ("/explorer/tx/0x1234".into(), 400, "is not a transaction hash"),
        ("/explorer/tx/%3Cb%3E".into(), 400, "&quot;&lt;b&gt;&quot; is not a transaction hash"),
        ("/explorer/block/6".into(), 200, "Block #6"),
        ("/explorer/block/99999".into(), 404, "there is no block 99999"),
        ("/explorer/block/six".into(), 400, "is not a block"),
        (format!("/explorer/address/{COUNTER}"), 200, "Traces"),
        ("/explorer/address/0x5fbdb".into(), 400, "is not an address"),
        ("/explorer/call".into(), 200, "Simulate a call"),
        ("/explorer/call?to=0x12".into(), 400, "is not an address"),
        ("/explorer/call?to=0x5fbdb2315678afecb367f032d93f642f64180aa3&block=999".into(), 404, ""),
        ("/explorer/nothing-here".into(), 404, "there is no page"),
        ("/explorer/search?q=what".into(), 400, "is not something to look up"),
        (format!("/explorer/search?q={unknown}"), 404, "no transaction or block"),
    ] {
        let (got, headers, body) = get(&base, &path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {says:?} not in {body}");
        assert_eq!(headers["content-security-policy"], loupe::explorer::CSP, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["content-type"], "text/html; charset=utf-8", "{path}");
    }
    // Search sends each kind of thing to its page.
    for (q, to) in [
        ("6".to_string(), "/explorer/block/6".to_string()),
        (hash6.clone(), format!("/explorer/tx/{hash6}")),
        (COUNTER.into(), "/explorer/address/0x5FbDB2315678afecb367f032d93F642f64180aa3".into()),
    ] {
        let (got, headers, _) = get(&base, &format!("/explorer/search?q={q}")).await;
        assert_eq!((got, headers["location"].to_str().unwrap()), (303, to.as_str()), "{q}");
    }
    let (got, headers, _) = get(&base, "/explorer").await;
    assert_eq!((got, headers["location"].to_str().unwrap()), (303, "/explorer/"));
    // HEAD as GET (status and headers, no body); any other method 405.
    let head = http.head(format!("{base}/explorer/")).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert!(head.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(head.bytes().await.unwrap().is_empty());
    for method in [reqwest::Method::POST, reqwest::Method::PUT] {
        let r = http.request(method.clone(), format!("{base}/explorer/")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 405, "{method}");
        assert_eq!(r.headers()["allow"], "GET, HEAD", "{method}");
    }
    let r = http.put(format!("{base}/explorer/call")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(r.headers()["allow"], "GET, HEAD, POST");

    // The call form is sent by POST. A call whose link fits is redirected to it (a GET of the
    // same page); one too long for a link is answered at once, without one.
    let no_redirect = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    let no_redirect = no_redirect.build().unwrap();
    let post = |body: String| {
        no_redirect
            .post(format!("{base}/explorer/call"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let r = post(format!("from={ACCOUNT0}&to={COUNTER}&value=&data=&block=13")).await.unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert!(to.starts_with("/explorer/call?") && to.ends_with("&block=13"), "{to}");
    assert!(to.to_lowercase().contains(&format!("to={COUNTER}")), "{to}");
    let (got, _, body) = get(&base, &to).await;
    assert_eq!(got, 200, "{body}");
    assert!(body.contains("0x0000000000000000000000000000000000000000000000000000000000000004"));
    let init = returning_init_code(MAX_INIT_CODE, &WORD);
    let r = post(format!("from={ACCOUNT0}&data={init}")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = r.text().await.unwrap();
    assert!(body.contains("class=\"ok\">success") && body.contains("no-link"), "{body}");
    assert!(body.contains(&format!("0x{}", alloy_primitives::hex::encode(WORD))), "{body}");
    // A URL longer than the server reads: a 414 that says why and where to go instead.
    // (No HTTP client here sends such a URI: written by hand.)
    let long = format!("/explorer/call?from={ACCOUNT0}&data=0x{}", "00".repeat(35_000));
    let answer = raw_get(&base, &long);
    assert!(answer.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{answer}");
    let text = &answer[answer.find("\r\n\r\n").unwrap()..];
    assert!(
        text.contains("65534 bytes") && text.contains("POST") && text.contains("/explorer/call"),
        "{answer}"
    );
    // The connection it came on is closed; the server serves the next one.
    assert_eq!(rpc(&http, &base, "eth_chainId", json!([])).await, "0x539");
    // The stylesheet and the script: embedded, cached for a year under their hash.
    let (_, _, home) = get(&base, "/explorer/").await;
    for (attr, kind) in
        [("href=\"/explorer/static/", "text/css"), ("src=\"/explorer/static/", "text/javascript")]
    {
        let at = home.find(attr).unwrap_or_else(|| panic!("no {attr} in {home}"));
        let rest = &home[at + attr.len() - "/explorer/static/".len()..];
        let path = &rest[..rest.find('"').unwrap()];
        let (got, headers, body) = get(&base, path).await;
        assert_eq!(got, 200, "{path}");
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind), "{path}");
        assert!(headers["cache-control"].to_str().unwrap().contains("immutable"), "{path}");
        assert!(!body.is_empty());
    }
    let (got, _, _) = get(&base, "/explorer/static/explorer.0000000000000000.css").await;
    assert_eq!(got, 404);
    // JSON-RPC beside it is unchanged.
    let chain = rpc(&http, &base, "eth_chainId", json!([])).await;
    assert_eq!(chain, "0x539");
    let (got, _, body) = get(&base, "/").await;
    assert_eq!((got, body.as_str()), (405, "Method Not Allowed: JSON-RPC takes POST\n"));
    let (got, _, body) = get(&base, "/explorerx").await;
    assert_eq!((got, body.as_str()), (404, "Not Found: JSON-RPC is served at /\n"));
}

#[test]
fn the_explorer_is_served_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = loupe::storage::Database::open(dir.path()).unwrap();
        let (spec, _) = loupe::import::init_genesis(&db, &loupe::dev::dev_genesis_json()).unwrap();
        loupe::dev::build_sample_history(&db, &spec).unwrap();
    }
    let datadir = dir.path().to_str().unwrap();
    let http = reqwest::blocking::Client::new();
    let get = |base: &str, path: &str| {
        let r = http.get(format!("{base}{path}")).send().unwrap();
        (r.status().as_u16(), r.text().unwrap())
    };
    let not_found = (404, "Not Found: JSON-RPC is served at /\n".to_string());
    // `node` and `follow` serve it with --http.explorer only; a path under /explorer/ is then
    // any unknown path.
    {
        let node = start(&["node", "--datadir", datadir, "--http.port", "0"]);
        assert_eq!(get(&node.base, "/explorer/"), not_found);
        assert_eq!(get(&node.base, "/explorer/tx/0x00"), not_found);
        assert!(!node.printed_within("serving the explorer", Duration::from_millis(500)));
    }
    {
        let node = start(&["node", "--datadir", datadir, "--http.port", "0", "--http.explorer"]);
        assert_eq!(get(&node.base, "/explorer/").0, 200);
        assert!(node.printed(&format!("{}/explorer/", node.base)));
    }
    // `dev` serves it unless told not to.
    {
        let node = dev(dir.path(), &["--http.explorer=false"]);
        assert_eq!(get(&node.base, "/explorer/"), not_found);
        // The banner ends with the curl examples.
        assert!(node.printed("curl -s -X POST"));
        assert!(!node.lines.lock().unwrap().iter().any(|l| l.contains("Explorer:")));
    }
}

/// Waits for `css` on the page a click is navigating to. The browser may abort a lookup made
/// while the old page is being left ("aborted by navigation"): that lookup is made again, as a
/// missing element is, until the wait's own timeout.
async fn after_navigation(c: &Client, css: &str) {
    let started = Instant::now();
    loop {
        match c.wait().for_element(Locator::Css(css)).await {
            Ok(_) => return,
            Err(e)
                if e.to_string().contains("aborted by navigation")
                    && started.elapsed() < Duration::from_secs(30) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("waiting for {css}: {e}"),
        }
    }
}
