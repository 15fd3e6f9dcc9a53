//! `/explorer/block/<number|hash>`: a stored block's header fields and its transactions, each
//! with its status, gas used and a link (`eth_getBlockByNumber`/`ByHash` with transactions,
//! `eth_getBlockReceipts`), and links to the blocks before and after it (none after the head,
//! `eth_blockNumber`).

use serde_json::{Value, json};

use crate::explorer::format::{ether, grouped, gwei, percent, quantity, quantity_u64, string, utc};
use crate::explorer::html::Html;
use crate::explorer::input::BlockId;
use crate::explorer::page::{
    Page, address_link, block_link, call, field, json_address, parse, render, tx_link,
};
use crate::explorer::{ExplorerError, input};
use crate::rpc::RpcCaller;

/// The page of the block `raw` names.
pub(crate) async fn page(rpc: &RpcCaller, raw: &str) -> Result<Page, ExplorerError> {
    let id = input::block_id(raw)?;
    let block = match id {
        BlockId::Hash(h) => call(rpc, "eth_getBlockByHash", json!([h, true])).await?,
        other => call(rpc, "eth_getBlockByNumber", json!([other.param(), true])).await?,
    };
    if block == "null" {
        return Err(ExplorerError::NotFound(format!(
            "there is no block {} in this node's chain",
            id.label()
        )));
    }
    // The receipts of this very block (by hash: a reorg between the calls cannot mix blocks);
    // serde skips the rest of the block without building it.
    #[derive(serde::Deserialize)]
    struct Hash {
        hash: alloy_primitives::B256,
    }
    let hash = parse::<Hash>("eth_getBlockByNumber", &block)?.hash;
    let receipts = call(rpc, "eth_getBlockReceipts", json!([hash])).await?;
    // Asked after the block: a head read before it could be below it.
    let head: String = parse("eth_blockNumber", &call(rpc, "eth_blockNumber", json!([])).await?)?;
    let head = input::number(&head).unwrap_or(0);
    let size = block.len() + receipts.len();
    let (title, body) = render(rpc, size, move || write(&block, &receipts, head)).await??;
    Ok(Page::ok(title, body))
}

/// The page's title and content from the two answers and the head's number.
fn write(block: &str, receipts: &str, head: u64) -> Result<(String, Html), ExplorerError> {
    let block: Value = parse("eth_getBlockByNumber", block)?;
    let receipts: Value = parse("eth_getBlockReceipts", receipts)?;
    let receipts = receipts.as_array().map_or(&[][..], Vec::as_slice);
    let txs = block.get("transactions").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let number = quantity_u64(&block, "number").unwrap_or(0);
    let mut h = Html::with_capacity(8 * 1024 + txs.len() * 700);
    h.raw("<h1>Block #").num(number).raw("</h1><p class=\"id\"><code class=\"word\">");
    h.text(string(&block, "hash")).raw("</code></p><nav class=\"pager\">");
    if number > 0 {
        h.raw("<a rel=\"prev\" href=\"/explorer/block/").num(number - 1).raw("\">← #");
        h.num(number - 1).raw("</a>");
    }
    if number < head {
        h.raw("<a rel=\"next\" href=\"/explorer/block/").num(number + 1).raw("\">#");
        h.num(number + 1).raw(" →</a>");
    } else {
        h.raw("<span class=\"note\">the head: no block after it yet</span>");
    }
    h.raw("</nav><dl class=\"summary\">");
    if let Some(t) = quantity_u64(&block, "timestamp") {
        field(&mut h, "time", &utc(t));
    }
    h.raw("<dt>parent</dt><dd>");
    if number > 0 {
        block_link(&mut h, number - 1);
        h.raw(" <code class=\"word\">").text(string(&block, "parentHash")).raw("</code>");
    }
    h.raw("</dd><dt>fee recipient</dt><dd>");
    if let Some(miner) = json_address(&block, "miner") {
        address_link(&mut h, &miner);
    }
    h.raw("</dd>");
    let used = quantity_u64(&block, "gasUsed").unwrap_or(0);
    let limit = quantity_u64(&block, "gasLimit").unwrap_or(0);
    field(
        &mut h,
        "gas used",
        &format!("{} of {} ({})", grouped(used), grouped(limit), percent(used, limit)),
    );
    if let Some(base) = quantity(&block, "baseFeePerGas") {
        field(&mut h, "base fee", &gwei(base));
    }
    if let Some(blob) = quantity_u64(&block, "blobGasUsed") {
        field(&mut h, "blob gas used", &grouped(blob));
    }
    field(&mut h, "transactions", &txs.len().to_string());
    if let Some(w) = block.get("withdrawals").and_then(Value::as_array) {
        field(&mut h, "withdrawals", &w.len().to_string());
    }
    if let Some(size) = quantity_u64(&block, "size") {
        field(&mut h, "size", &format!("{} bytes", grouped(size)));
    }
    for (name, key) in [
        ("state root", "stateRoot"),
        ("transactions root", "transactionsRoot"),
        ("receipts root", "receiptsRoot"),
    ] {
        h.raw("<dt>").raw(name).raw("</dt><dd><code class=\"word\">");
        h.text(string(&block, key)).raw("</code></dd>");
    }
    h.raw("</dl><section><h2>Transactions</h2>");
    if txs.is_empty() {
        h.raw("<p class=\"note\">No transactions.</p></section>");
        return Ok((format!("Block #{number}"), h));
    }
    // The status comes first after the index, so that a phone-sized screen shows it.
    h.raw("<div class=\"scroll\"><table class=\"txs\"><thead><tr><th>#</th><th>status</th>");
    h.raw("<th>hash</th><th>from</th><th>to</th><th>value</th><th>gas used</th></tr>");
    h.raw("</thead><tbody>");
    for (i, tx) in txs.iter().enumerate() {
        let receipt = receipts.get(i).unwrap_or(&Value::Null);
        h.raw("<tr><td>").num(i).raw("</td><td class=\"status\">");
        h.raw(match string(receipt, "status") {
            "0x1" => "<span class=\"ok\">success</span>",
            "0x0" => "<span class=\"error\">failed</span>",
            _ => "",
        });
        h.raw("</td><td>");
        tx_link(&mut h, string(tx, "hash"));
        h.raw("</td><td>");
        if let Some(from) = json_address(tx, "from") {
            address_link(&mut h, &from);
        }
        h.raw("</td><td>");
        match (json_address(tx, "to"), json_address(receipt, "contractAddress")) {
            (Some(to), _) => address_link(&mut h, &to),
            (None, Some(created)) => {
                h.raw("<span class=\"note\">new</span> ");
                address_link(&mut h, &created);
            }
            (None, None) => {
                h.raw("<span class=\"note\">creation</span>");
            }
        }
        h.raw("</td><td>").text(&ether(quantity(tx, "value").unwrap_or_default()));
        h.raw("</td><td>").text(&grouped(quantity_u64(receipt, "gasUsed").unwrap_or(0)));
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table></div></section>");
    Ok((format!("Block #{number}"), h))
}
