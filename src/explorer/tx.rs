//! `/explorer/tx/<hash>`: a stored transaction: its summary (status, block, parties, value,
//! gas and fee), its call tree and state diff (`trace_replayTransaction` with `trace` and
//! `stateDiff`), and its logs.

use alloy_primitives::{B256, Bytes, U256};
use alloy_rpc_types_trace::parity::TraceResults;
use serde_json::{Value, json};

use crate::explorer::format::{
    bytes, ether, grouped, gwei, hex_len, quantity, quantity_u64, string,
};
use crate::explorer::html::Html;
use crate::explorer::page::{
    Page, address_link, block_link, call, field, json_address, parse, render,
};
use crate::explorer::{ExplorerError, input, trace};
use crate::rpc::RpcCaller;

/// The page of the transaction `raw` names.
pub(crate) async fn page(rpc: &RpcCaller, raw: &str) -> Result<Page, ExplorerError> {
    let hash = input::hash(raw, "transaction")?;
    let tx = call(rpc, "eth_getTransactionByHash", json!([hash])).await?;
    if tx == "null" {
        return Err(ExplorerError::NotFound(format!(
            "there is no transaction {hash} in this node's chain"
        )));
    }
    let receipt = call(rpc, "eth_getTransactionReceipt", json!([hash])).await?;
    let traced =
        call(rpc, "trace_replayTransaction", json!([hash, ["trace", "stateDiff"]])).await?;
    let size = tx.len() + receipt.len() + traced.len();
    let body = render(rpc, size, move || write(&hash, &tx, &receipt, &traced)).await??;
    Ok(Page::ok(format!("Transaction {hash}"), body))
}

/// The page's content from the three answers.
fn write(hash: &B256, tx: &str, receipt: &str, traced: &str) -> Result<Html, ExplorerError> {
    let tx: Value = parse("eth_getTransactionByHash", tx)?;
    let receipt: Value = parse("eth_getTransactionReceipt", receipt)?;
    let traced: TraceResults = parse("trace_replayTransaction", traced)?;
    let mut h = Html::with_capacity(16 * 1024 + traced.trace.len() * 1024);
    h.raw("<h1>Transaction</h1><p class=\"id\"><code class=\"word\">").show(hash);
    h.raw("</code></p><dl class=\"summary\">");
    let ok = string(&receipt, "status") != "0x0";
    h.raw("<dt>status</dt><dd>");
    if ok {
        h.raw("<span class=\"ok\">success</span>");
    } else {
        h.raw("<span class=\"error\">failed</span>");
        if let Some(note) = trace::output_note(&traced.output, true) {
            h.raw(" · <span class=\"error revert\">").text(&note).raw("</span>");
        }
    }
    h.raw("</dd><dt>block</dt><dd>");
    if let Some(n) = quantity_u64(&tx, "blockNumber") {
        block_link(&mut h, n);
        if let Some(i) = quantity_u64(&tx, "transactionIndex") {
            h.raw(", position ").num(i);
        }
    }
    h.raw("</dd><dt>from</dt><dd>");
    if let Some(from) = json_address(&tx, "from") {
        address_link(&mut h, &from);
    }
    h.raw("</dd><dt>to</dt><dd>");
    match json_address(&tx, "to") {
        Some(to) => address_link(&mut h, &to),
        None => {
            h.raw("contract creation");
            if let Some(created) = json_address(&receipt, "contractAddress") {
                h.raw(": ");
                address_link(&mut h, &created);
            }
        }
    }
    h.raw("</dd>");
    let value = quantity(&tx, "value").unwrap_or_default();
    h.raw("<dt>value</dt><dd title=\"").show(value).raw(" wei\">").text(&ether(value));
    h.raw("</dd>");
    let used = quantity_u64(&receipt, "gasUsed").unwrap_or(0);
    let limit = quantity_u64(&tx, "gas").unwrap_or(0);
    h.raw("<dt>gas used</dt><dd>").text(&grouped(used)).raw(" of ").text(&grouped(limit));
    h.raw("</dd>");
    let price = quantity(&receipt, "effectiveGasPrice").unwrap_or_default();
    let mut fee = U256::from(used) * price;
    h.raw("<dt>gas price</dt><dd>").text(&gwei(price)).raw("</dd>");
    if let (Some(blob_gas), Some(blob_price)) =
        (quantity(&receipt, "blobGasUsed"), quantity(&receipt, "blobGasPrice"))
    {
        fee += blob_gas * blob_price;
        field(&mut h, "blob gas", &format!("{} at {}", grouped(blob_gas), gwei(blob_price)));
    }
    h.raw("<dt>fee</dt><dd title=\"").show(fee).raw(" wei\">").text(&ether(fee)).raw("</dd>");
    let kind = quantity_u64(&tx, "type").unwrap_or(0);
    field(&mut h, "type", &format!("{kind} ({})", tx_type(kind)));
    if let Some(nonce) = quantity_u64(&tx, "nonce") {
        field(&mut h, "nonce", &nonce.to_string());
    }
    let input = string(&tx, "input");
    field(&mut h, "input", &bytes(hex_len(input)));
    if let Some(list) = tx.get("authorizationList").and_then(Value::as_array) {
        field(&mut h, "authorizations", &list.len().to_string());
    }
    if let Some(list) = tx.get("blobVersionedHashes").and_then(Value::as_array) {
        field(&mut h, "blobs", &list.len().to_string());
    }
    h.raw("</dl>");

    h.raw("<section><h2>Output</h2>");
    trace::output(&mut h, &traced.output, !ok);
    h.raw("</section><section><h2>Call tree</h2>");
    trace::call_tree(&mut h, &traced.trace, Some(used));
    h.raw("</section><section><h2>State changes</h2>");
    match &traced.state_diff {
        Some(diff) => trace::state_diff(&mut h, diff),
        None => {
            h.raw("<p class=\"note\">No state diff.</p>");
        }
    }
    h.raw("</section>");
    logs(&mut h, &receipt);
    Ok(h)
}

/// The receipt's logs: address, topics, data.
fn logs(h: &mut Html, receipt: &Value) {
    let logs = receipt.get("logs").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    h.raw("<section><h2>Logs</h2>");
    if logs.is_empty() {
        h.raw("<p class=\"note\">No logs.</p></section>");
        return;
    }
    h.raw("<ol class=\"logs\">");
    for log in logs {
        h.raw("<li><dl class=\"summary\"><dt>address</dt><dd>");
        if let Some(a) = json_address(log, "address") {
            address_link(h, &a);
        }
        h.raw("</dd>");
        let topics = log.get("topics").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for (i, topic) in topics.iter().enumerate() {
            h.raw("<dt>topic ").num(i).raw("</dt><dd><code class=\"word\">");
            h.text(topic.as_str().unwrap_or("")).raw("</code></dd>");
        }
        let data: Bytes = string(log, "data").parse().unwrap_or_default();
        h.raw("<dt>data</dt><dd>");
        trace::data_block(h, &data);
        h.raw("</dd></dl></li>");
    }
    h.raw("</ol></section>");
}

/// The name of a transaction type.
fn tx_type(kind: u64) -> &'static str {
    match kind {
        0 => "legacy",
        1 => "access list, EIP-2930",
        2 => "dynamic fee, EIP-1559",
        3 => "blob, EIP-4844",
        4 => "set code, EIP-7702",
        _ => "other",
    }
}
