//! `/explorer/address/<address>`: balance, nonce and code size at the head and, with
//! `?block=`, at a chosen block (`eth_getBalance`, `eth_getTransactionCount`, `eth_getCode`),
//! and the address's traces from `trace_filter`, 25 a page, over a window of blocks.

use alloy_primitives::{Address, B256, U256};
use alloy_rpc_types_trace::parity::LocalizedTransactionTrace;
use serde_json::{Value, json};

use crate::explorer::format::{bytes, ether, grouped, hex_len};
use crate::explorer::html::Html;
use crate::explorer::input::{BlockId, Query, quote};
use crate::explorer::page::{Page, address_link, block_link, call, parse, render};
use crate::explorer::{ExplorerError, input, trace};
use crate::rpc::RpcCaller;

/// Traces on one page.
const PAGE: usize = 25;
/// Blocks one window of traces covers (`--trace.max-filter-range` is 10,000 by default).
const WINDOW: u64 = 10_000;

/// An account's state at one block.
struct State {
    block: u64,
    balance: U256,
    nonce: u64,
    code: String,
}

/// The page of the address `raw` names.
pub(crate) async fn page(rpc: &RpcCaller, raw: &str, q: &Query) -> Result<Page, ExplorerError> {
    let address = input::address(raw)?;
    let at = q.get("block").map(input::block_id).transpose()?;
    let page: usize = match q.get("page") {
        None => 0,
        Some(p) => p.parse().ok().filter(|p| *p < 1_000_000).ok_or_else(|| {
            ExplorerError::BadRequest(format!("{} is not a page number", quote(p)))
        })?,
    };
    let head = number(&call(rpc, "eth_blockNumber", json!([])).await?)?;
    let to = match q.get("to") {
        None => head,
        Some(t) => input::number(t).filter(|t| *t <= head).ok_or_else(|| {
            ExplorerError::BadRequest(format!("{} is not a block up to the head #{head}", quote(t)))
        })?,
    };
    let now = state(rpc, address, BlockId::Number(head)).await?;
    let then = match at {
        Some(id) => Some(state(rpc, address, id).await?),
        None => None,
    };
    let from = to.saturating_sub(WINDOW - 1);
    let filter = json!([{
        "fromBlock": format!("{from:#x}"),
        "toBlock": format!("{to:#x}"),
        "fromAddress": [address],
        "toAddress": [address],
        "mode": "union",
        "after": page * PAGE,
        "count": PAGE + 1,
    }]);
    // A refused filter (a smaller --trace.max-filter-range) still leaves the account's state.
    let traces = call(rpc, "trace_filter", filter).await;
    let size = traces.as_ref().map_or(0, String::len);
    let view = View { address, now, then, from, to, page };
    let body = render(rpc, size, move || write(&view, traces)).await??;
    Ok(Page::ok(format!("Address {address}"), body))
}

/// A quantity result (`"0x14"`).
fn number(json: &str) -> Result<u64, ExplorerError> {
    let text: String = parse("eth_blockNumber", json)?;
    input::number(&text).ok_or_else(|| ExplorerError::Unreadable {
        method: "eth_blockNumber",
        detail: format!("{text:?} is not a quantity"),
    })
}

/// Balance, nonce and code of `address` at `id`.
async fn state(rpc: &RpcCaller, address: Address, id: BlockId) -> Result<State, ExplorerError> {
    let block = match id {
        BlockId::Number(n) => n,
        other => {
            let header = match other {
                BlockId::Hash(h) => call(rpc, "eth_getBlockByHash", json!([h, false])).await?,
                _ => call(rpc, "eth_getBlockByNumber", json!([other.param(), false])).await?,
            };
            if header == "null" {
                return Err(ExplorerError::NotFound(format!(
                    "there is no block {} in this node's chain",
                    other.label()
                )));
            }
            let v: Value = parse("eth_getBlockByHash", &header)?;
            crate::explorer::format::quantity_u64(&v, "number").unwrap_or(0)
        }
    };
    let at = json!([address, format!("{block:#x}")]);
    let balance: U256 = parse("eth_getBalance", &call(rpc, "eth_getBalance", at.clone()).await?)?;
    let nonce = call(rpc, "eth_getTransactionCount", at.clone()).await?;
    let nonce: String = parse("eth_getTransactionCount", &nonce)?;
    let code: String = parse("eth_getCode", &call(rpc, "eth_getCode", at).await?)?;
    Ok(State { block, balance, nonce: input::number(&nonce).unwrap_or(0), code })
}

/// What the page shows.
struct View {
    address: Address,
    now: State,
    then: Option<State>,
    from: u64,
    to: u64,
    page: usize,
}

impl View {
    /// This page's link with another page of traces or window.
    fn link(&self, h: &mut Html, to: u64, page: usize) {
        h.raw("/explorer/address/").show(self.address).raw("?to=").num(to);
        if page > 0 {
            h.raw("&amp;page=").num(page);
        }
        if let Some(then) = &self.then {
            h.raw("&amp;block=").num(then.block);
        }
    }
}

fn write(v: &View, traces: Result<String, ExplorerError>) -> Result<Html, ExplorerError> {
    let mut h = Html::with_capacity(16 * 1024);
    h.raw("<h1>Address</h1><p class=\"id\"><code class=\"word\">").show(v.address);
    h.raw("</code></p><div class=\"scroll\"><table class=\"state\"><thead><tr><th></th>");
    h.raw("<th>at the head, ");
    block_link(&mut h, v.now.block);
    h.raw("</th>");
    if let Some(then) = &v.then {
        h.raw("<th>at ");
        block_link(&mut h, then.block);
        h.raw("</th>");
    }
    h.raw("</tr></thead><tbody>");
    let states: Vec<&State> = std::iter::once(&v.now).chain(&v.then).collect();
    h.raw("<tr><th>balance</th>");
    for s in &states {
        h.raw("<td class=\"balance\" title=\"").show(s.balance).raw(" wei\">");
        h.text(&ether(s.balance)).raw("</td>");
    }
    h.raw("</tr><tr><th>nonce</th>");
    for s in &states {
        h.raw("<td class=\"nonce\">").num(s.nonce).raw("</td>");
    }
    h.raw("</tr><tr><th>code</th>");
    for s in &states {
        h.raw("<td class=\"code\">").text(&bytes(hex_len(&s.code)));
        if let Some(target) = delegation(&s.code) {
            h.raw(", delegated to ");
            address_link(&mut h, &target);
        }
        h.raw("</td>");
    }
    h.raw("</tr></tbody></table></div>");
    h.raw("<form class=\"at\" method=\"get\" action=\"/explorer/address/").show(v.address);
    h.raw("\"><label>State at block <input name=\"block\" inputmode=\"numeric\" ");
    h.raw("placeholder=\"number or hash\" value=\"");
    if let Some(then) = &v.then {
        h.num(then.block);
    }
    h.raw("\"></label> <button type=\"submit\">Show</button></form>");

    h.raw(
        "<section><h2>Traces</h2><p class=\"note\">Calls, creations and self-destructs from \
           or to this address in blocks ",
    );
    h.num(v.from).raw("–").num(v.to).raw(" (trace_filter), oldest first.</p>");
    match traces.and_then(|t| parse::<Vec<LocalizedTransactionTrace>>("trace_filter", &t)) {
        Err(e) => {
            h.raw("<p class=\"problem\">").text(&e.to_string()).raw("</p>");
        }
        Ok(list) if list.is_empty() && v.page == 0 => {
            h.raw("<p class=\"note\">None in these blocks.</p>");
        }
        Ok(list) => {
            h.raw("<div class=\"scroll\"><table class=\"traces\"><thead><tr><th>block</th>");
            h.raw("<th>transaction</th><th>frame</th><th>kind</th><th>from</th><th>to</th>");
            h.raw("<th>value</th><th>gas used</th><th>error</th></tr></thead><tbody>");
            for t in list.iter().take(PAGE) {
                let tx: Option<&B256> = t.transaction_hash.as_ref();
                trace::frame_row(&mut h, &t.trace, t.block_number, tx);
            }
            h.raw("</tbody></table></div>");
            pager(&mut h, v, list.len() > PAGE);
        }
    }
    h.raw("</section>");
    Ok(h)
}

/// Links to the previous and next page of traces, and to the window before.
fn pager(h: &mut Html, v: &View, more: bool) {
    h.raw("<nav class=\"pager\">");
    if v.page > 0 {
        h.raw("<a rel=\"prev\" href=\"");
        v.link(h, v.to, v.page - 1);
        h.raw("\">← previous ").num(PAGE).raw("</a>");
    }
    if more {
        h.raw("<a rel=\"next\" href=\"");
        v.link(h, v.to, v.page + 1);
        h.raw("\">next ").num(PAGE).raw(" →</a>");
    }
    if v.from > 0 {
        h.raw("<a href=\"");
        v.link(h, v.from - 1, 0);
        h.raw("\">blocks up to #").num(v.from - 1).raw("</a>");
    }
    h.raw("</nav><p class=\"note\">page ").text(&grouped(v.page + 1)).raw("</p>");
}

/// The target of an EIP-7702 delegation (`0xef0100` and an address).
fn delegation(code: &str) -> Option<Address> {
    let rest = code.strip_prefix("0xef0100")?;
    (rest.len() == 40).then(|| rest.parse().ok()).flatten()
}
