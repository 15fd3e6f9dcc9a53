//! `/explorer/`: the start page (the newest blocks), and `/explorer/search?q=`, which sends a
//! transaction or block hash, a block number or an address to its page.

use serde_json::{Value, json};

use crate::explorer::format::{grouped, quantity_u64, utc};
use crate::explorer::html::Html;
use crate::explorer::input::{Query, quote};
use crate::explorer::page::{Page, block_link, call, parse};
use crate::explorer::{ExplorerError, input};
use crate::rpc::RpcCaller;

/// Blocks the start page lists.
const NEWEST: u64 = 10;

/// The start page: what can be looked up, and the newest blocks.
pub(crate) async fn page(rpc: &RpcCaller) -> Result<Page, ExplorerError> {
    let head: String = parse("eth_blockNumber", &call(rpc, "eth_blockNumber", json!([])).await?)?;
    let head = input::number(&head).unwrap_or(0);
    let mut h = Html::with_capacity(8 * 1024);
    h.raw(
        "<h1>loupe explorer</h1><p>Look up a transaction or block hash, a block number or an \
           address in the box above, or <a href=\"/explorer/call\">simulate a call</a>. Every \
           page is built from this node's JSON-RPC methods.</p>",
    );
    h.raw("<section><h2>Newest blocks</h2><div class=\"scroll\"><table class=\"blocks\">");
    h.raw("<thead><tr><th>block</th><th>time</th><th>transactions</th><th>gas used</th></tr>");
    h.raw("</thead><tbody>");
    for n in (head.saturating_sub(NEWEST - 1)..=head).rev() {
        let block = call(rpc, "eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await?;
        let block: Value = parse("eth_getBlockByNumber", &block)?;
        if block.is_null() {
            continue;
        }
        let txs = block.get("transactions").and_then(Value::as_array).map_or(0, Vec::len);
        h.raw("<tr><td>");
        block_link(&mut h, n);
        h.raw("</td><td>").text(&quantity_u64(&block, "timestamp").map(utc).unwrap_or_default());
        h.raw("</td><td>").num(txs).raw("</td><td>");
        h.text(&grouped(quantity_u64(&block, "gasUsed").unwrap_or(0))).raw("</td></tr>");
    }
    h.raw("</tbody></table></div></section>");
    Ok(Page::ok("Explorer", h))
}

/// Where a search goes.
pub(crate) async fn search(rpc: &RpcCaller, q: &Query) -> Result<Page, ExplorerError> {
    let Some(text) = q.get("q") else { return Ok(Page::Redirect("/explorer/".into())) };
    if text.len() == 42 {
        let address = input::address(text)?;
        return Ok(Page::Redirect(format!("/explorer/address/{address}")));
    }
    if text.len() == 66 {
        let hash = input::hash(text, "transaction or block")?;
        if call(rpc, "eth_getTransactionByHash", json!([hash])).await? != "null" {
            return Ok(Page::Redirect(format!("/explorer/tx/{hash}")));
        }
        if call(rpc, "eth_getBlockByHash", json!([hash, false])).await? != "null" {
            return Ok(Page::Redirect(format!("/explorer/block/{hash}")));
        }
        return Err(ExplorerError::NotFound(format!(
            "there is no transaction or block {hash} in this node's chain"
        )));
    }
    if let Some(n) = input::number(text) {
        return Ok(Page::Redirect(format!("/explorer/block/{n}")));
    }
    Err(ExplorerError::BadRequest(format!(
        "{} is not something to look up: give a transaction or block hash (0x and 64 hex \
         digits), a block number, or an address (0x and 40 hex digits)",
        quote(text)
    )))
}
