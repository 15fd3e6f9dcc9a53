//! `/explorer/call`: a form (from, to, value, data, block) that runs `trace_call` with `trace`
//! and `stateDiff` and shows its output, call tree and state diff as a transaction's page does.
//!
//! The form is sent by POST, so init code and call data of any length reach the node: sent by
//! GET, they rode in the URL, which this server reads up to 65,534 bytes (about 32 KiB of data
//! as hex) and many proxies up to 8 KiB. A call whose URL fits [`LINK_MAX`] is then redirected
//! (303) to that URL, a GET of the same page, which can be shared; a longer one is shown in the
//! POST's answer, with no link.

use alloy_primitives::{Address, Bytes, U256};
use alloy_rpc_types_trace::parity::TraceResults;
use http::StatusCode;
use serde_json::{Map, Value, json};

use crate::explorer::format::grouped;
use crate::explorer::html::Html;
use crate::explorer::input::{BlockId, Query, percent_encode};
use crate::explorer::page::{Page, call, parse, render};
use crate::explorer::{ExplorerError, input, trace};
use crate::rpc::RpcCaller;

/// Longest URL a call's link may have: 8 KiB, what common servers and proxies take (nginx's
/// default header buffer); a longer call is answered without a link.
pub(crate) const LINK_MAX: usize = 8 * 1024;

/// The form's fields as sent.
#[derive(Debug, Default)]
struct Form {
    from: String,
    to: String,
    value: String,
    data: String,
    block: String,
}

/// The call the form asks for, checked.
#[derive(Debug)]
struct Call {
    from: Option<Address>,
    to: Option<Address>,
    value: Option<U256>,
    data: Option<Bytes>,
    block: BlockId,
}

impl Form {
    fn new(q: &Query) -> Self {
        let get = |k: &str| q.get(k).unwrap_or("").to_string();
        Self {
            from: get("from"),
            to: get("to"),
            value: get("value"),
            data: get("data"),
            block: get("block"),
        }
    }

    fn is_empty(&self) -> bool {
        [&self.from, &self.to, &self.value, &self.data, &self.block].iter().all(|f| f.is_empty())
    }

    fn check(&self) -> Result<Call, ExplorerError> {
        let opt = |s: &str| (!s.is_empty()).then_some(s.to_string());
        Ok(Call {
            from: opt(&self.from).map(|s| input::address(&s)).transpose()?,
            to: opt(&self.to).map(|s| input::address(&s)).transpose()?,
            value: opt(&self.value).map(|s| input::wei(&s)).transpose()?,
            data: opt(&self.data).map(|s| input::hex_data(&s)).transpose()?,
            block: match self.block.as_str() {
                "" => BlockId::Latest,
                b => input::block_id(b)?,
            },
        })
    }
}

impl Call {
    /// The call object of `trace_call`.
    fn object(&self) -> Value {
        let mut o = Map::new();
        if let Some(from) = self.from {
            o.insert("from".into(), json!(from));
        }
        if let Some(to) = self.to {
            o.insert("to".into(), json!(to));
        }
        if let Some(value) = self.value {
            o.insert("value".into(), json!(format!("{value:#x}")));
        }
        if let Some(data) = &self.data {
            o.insert("data".into(), json!(data));
        }
        Value::Object(o)
    }

    /// The page's URL for this call, as the form would send it.
    fn url(&self) -> String {
        let mut parts = Vec::new();
        if let Some(from) = self.from {
            parts.push(format!("from={from}"));
        }
        if let Some(to) = self.to {
            parts.push(format!("to={to}"));
        }
        if let Some(value) = self.value {
            parts.push(format!("value={value}"));
        }
        if let Some(data) = &self.data {
            parts.push(format!("data={data}"));
        }
        parts.push(format!("block={}", percent_encode(&self.block.label())));
        format!("/explorer/call?{}", parts.join("&"))
    }
}

/// The form sent by POST (`application/x-www-form-urlencoded`): a redirect to the call's URL
/// when it fits [`LINK_MAX`], else the traced call itself.
pub(crate) async fn post(rpc: &RpcCaller, body: &[u8]) -> Result<Page, ExplorerError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ExplorerError::BadRequest("the form's body is not UTF-8 text".into()))?;
    let form = Form::new(&Query::parse(Some(text))?);
    if let Ok(c) = form.check() {
        let url = c.url();
        if url.len() <= LINK_MAX {
            return Ok(Page::Redirect(url));
        }
    }
    page_of(rpc, form).await
}

/// The form, and the traced call when the query holds one.
pub(crate) async fn page(rpc: &RpcCaller, q: &Query) -> Result<Page, ExplorerError> {
    page_of(rpc, Form::new(q)).await
}

/// The form as sent, and the call it asks for traced (or why it cannot be).
async fn page_of(rpc: &RpcCaller, form: Form) -> Result<Page, ExplorerError> {
    let mut h = Html::with_capacity(8 * 1024);
    h.raw(
        "<h1>Simulate a call</h1><p class=\"note\">Runs <code>trace_call</code> on this \
           node's state after the chosen block: nothing is signed, sent or stored.</p>",
    );
    write_form(&mut h, &form);
    if form.is_empty() {
        return Ok(Page::ok("Simulate a call", h));
    }
    let checked = form.check().map(|c| (c.object(), c));
    let outcome = match checked {
        Err(e) => Err(e),
        Ok((object, c)) => {
            let params = json!([object, ["trace", "stateDiff"], c.block.param()]);
            call(rpc, "trace_call", params).await.map(|answer| (answer, c))
        }
    };
    let (answer, c) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            h.raw("<p class=\"problem\">").text(&e.to_string()).raw("</p>");
            let status = e.status();
            return Ok(Page::Html { status, title: "Simulate a call".into(), body: h });
        }
    };
    let url = c.url();
    let label = c.block.label();
    let result = render(rpc, answer.len(), move || write_result(&answer, &url, &label)).await??;
    h.append(result);
    Ok(Page::Html { status: StatusCode::OK, title: "Simulated call".into(), body: h })
}

fn write_form(h: &mut Html, f: &Form) {
    h.raw("<form class=\"call\" method=\"post\" action=\"/explorer/call\">");
    let input = |h: &mut Html, name: &'static str, label: &'static str, hint: &'static str, v| {
        h.raw("<label><span>").raw(label).raw("</span><input name=\"").raw(name);
        h.raw("\" placeholder=\"").raw(hint).raw("\" autocomplete=\"off\" spellcheck=\"false\" ");
        h.raw("value=\"").text(v).raw("\"></label>");
    };
    input(h, "from", "from", "0x… (empty: the zero address)", &f.from);
    input(h, "to", "to", "0x… (empty: create, with data as init code)", &f.to);
    input(h, "value", "value", "wei, decimal or 0x hex", &f.value);
    h.raw("<label><span>data</span><textarea name=\"data\" rows=\"3\" placeholder=\"0x…\" ");
    h.raw("spellcheck=\"false\">").text(&f.data).raw("</textarea></label>");
    input(h, "block", "block", "latest, a number or a hash", &f.block);
    h.raw("<button type=\"submit\">Trace call</button></form>");
}

/// The traced call: outcome, output, call tree, state diff, and its link.
fn write_result(answer: &str, url: &str, block: &str) -> Result<Html, ExplorerError> {
    let traced: TraceResults = parse("trace_call", answer)?;
    let mut h = Html::with_capacity(8 * 1024 + traced.trace.len() * 1024);
    let top = traced.trace.first();
    let error = top.and_then(|t| t.error.as_deref());
    h.raw("<section class=\"result\"><h2>Result</h2><dl class=\"summary\"><dt>at block</dt><dd>");
    h.text(block).raw("</dd><dt>status</dt><dd>");
    match error {
        None => {
            h.raw("<span class=\"ok\">success</span>");
        }
        Some("Reverted") => {
            h.raw("<span class=\"error\">reverted</span>");
        }
        Some(other) => {
            h.raw("<span class=\"error\">failed: ").text(other).raw("</span>");
        }
    }
    h.raw("</dd>");
    if let Some(used) = top.map(trace::Frame::of).and_then(|f| f.gas_used) {
        h.raw("<dt>gas used</dt><dd>").text(&grouped(used)).raw(" (by the top frame)</dd>");
    }
    if url.len() <= LINK_MAX {
        h.raw("<dt>link</dt><dd><a class=\"share\" href=\"").text(url).raw("\">this call</a></dd>");
    } else {
        h.raw("<dt>link</dt><dd class=\"note no-link\">none: the call's URL would take ");
        h.text(&grouped(url.len())).raw(" bytes, over the ").text(&grouped(LINK_MAX));
        h.raw(" a link may take (servers and proxies refuse longer ones)</dd>");
    }
    h.raw("</dl><h3>Output</h3>");
    trace::output(&mut h, &traced.output, error == Some("Reverted"));
    h.raw("</section><section><h2>Call tree</h2>");
    trace::call_tree(&mut h, &traced.trace, None);
    h.raw("</section><section><h2>State changes</h2>");
    match &traced.state_diff {
        Some(diff) => trace::state_diff(&mut h, diff),
        None => {
            h.raw("<p class=\"note\">No state diff.</p>");
        }
    }
    h.raw("</section>");
    Ok(h)
}
