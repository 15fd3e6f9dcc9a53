//! How a trace is shown: the call tree of a transaction or a simulated call (one collapsible
//! `<details>` per frame, nested as the frames are), its output and revert reason, the state
//! diff as a table, and one frame as a table row (an address's traces).

use alloy_primitives::{Address, B256, Bytes, U64, U256};
use alloy_rpc_types_trace::parity::{
    AccountDiff, Action, CallType, CreationMethod, Delta, StateDiff, TraceOutput, TransactionTrace,
};

use crate::explorer::format::{bytes, ether, grouped, percent};
use crate::explorer::html::Html;
use crate::explorer::page::address_link;

/// Most frames one page shows; the rest are counted, not shown.
pub(crate) const MAX_FRAMES: usize = 5_000;
/// Most rows of one state diff table.
pub(crate) const MAX_DIFF_ROWS: usize = 5_000;
/// Most bytes of one input or output shown in full.
const MAX_HEX_BYTES: usize = 4_096;

/// One frame, as the pages show it, whatever its kind.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    /// `call`, `staticcall`, `delegatecall`, `callcode`, `create`, `create2`, `selfdestruct`,
    /// `reward`.
    pub(crate) kind: &'static str,
    /// Caller, creator, self-destructed contract, reward author.
    pub(crate) from: Address,
    /// Callee, created contract (when created), beneficiary.
    pub(crate) to: Option<Address>,
    /// Value sent, endowment, balance left to the beneficiary, reward.
    pub(crate) value: U256,
    /// Call input or init code.
    pub(crate) input: Option<&'a Bytes>,
    /// Gas given to the frame.
    pub(crate) gas: Option<u64>,
    /// Gas the frame used, when it has a result.
    pub(crate) gas_used: Option<u64>,
    /// Return or revert data, or the created code.
    pub(crate) output: Option<&'a Bytes>,
    /// Why the frame failed (`Reverted`, `Out of gas`…).
    pub(crate) error: Option<&'a str>,
}

impl<'a> Frame<'a> {
    /// The frame of a trace entry.
    pub(crate) fn of(t: &'a TransactionTrace) -> Self {
        let (gas_used, output, created) = match &t.result {
            Some(TraceOutput::Call(c)) => (Some(c.gas_used), Some(&c.output), None),
            Some(TraceOutput::Create(c)) => (Some(c.gas_used), Some(&c.code), Some(c.address)),
            None => (None, None, None),
        };
        let error = t.error.as_deref();
        let base = Self {
            kind: "call",
            from: Address::ZERO,
            to: None,
            value: U256::ZERO,
            input: None,
            gas: None,
            gas_used,
            output,
            error,
        };
        match &t.action {
            Action::Call(c) => Self {
                kind: match c.call_type {
                    CallType::StaticCall => "staticcall",
                    CallType::DelegateCall => "delegatecall",
                    CallType::CallCode => "callcode",
                    CallType::AuthCall => "authcall",
                    CallType::Call | CallType::None => "call",
                },
                from: c.from,
                to: Some(c.to),
                value: c.value,
                input: Some(&c.input),
                gas: Some(c.gas),
                ..base
            },
            Action::Create(c) => Self {
                kind: match c.creation_method {
                    CreationMethod::Create2 => "create2",
                    CreationMethod::EofCreate => "eofcreate",
                    CreationMethod::Create | CreationMethod::None => "create",
                },
                from: c.from,
                to: created,
                value: c.value,
                input: Some(&c.init),
                gas: Some(c.gas),
                ..base
            },
            Action::Selfdestruct(s) => Self {
                kind: "selfdestruct",
                from: s.address,
                to: Some(s.refund_address),
                value: s.balance,
                ..base
            },
            Action::Reward(r) => Self { kind: "reward", from: r.author, value: r.value, ..base },
        }
    }

    /// Whether the frame is a creation.
    fn creates(&self) -> bool {
        matches!(self.kind, "create" | "create2" | "eofcreate")
    }
}

/// What a frame's output says: the revert reason of a reverted frame, the number a 32-byte
/// return holds.
pub(crate) fn output_note(output: &[u8], reverted: bool) -> Option<String> {
    if reverted {
        return Some(match crate::rpc::revert_reason(output) {
            Some(reason) => format!("reverted: {reason}"),
            None if output.is_empty() => "reverted without data".into(),
            None => format!("reverted with {} of data", bytes(output.len())),
        });
    }
    (output.len() == 32).then(|| format!("uint256 {}", U256::from_be_slice(output)))
}

/// A frame's failure as one line: the decoded revert reason, or the error.
fn failure(f: &Frame<'_>) -> Option<String> {
    let error = f.error?;
    if error == "Reverted" {
        return output_note(f.output.map_or(&[][..], |o| &o[..]), true);
    }
    Some(error.to_string())
}

/// `0x` hex of `data`, cut at [`MAX_HEX_BYTES`] with the rest counted.
fn hex_text(h: &mut Html, data: &[u8]) {
    let shown = &data[..data.len().min(MAX_HEX_BYTES)];
    h.raw("<code class=\"data\">0x").text(&alloy_primitives::hex::encode(shown)).raw("</code>");
    if data.len() > shown.len() {
        h.raw(" <span class=\"note\">… ")
            .text(&bytes(data.len() - shown.len()))
            .raw(" more</span>");
    }
}

/// The call tree of `traces` (in the order the trace lists them, parents before children):
/// each frame a `<details>` open by default, its children inside it. `root_gas` is what the
/// top frame's gas bar is relative to (the transaction's gas used), else its own.
pub(crate) fn call_tree(h: &mut Html, traces: &[TransactionTrace], root_gas: Option<u64>) {
    if traces.is_empty() {
        h.raw("<p class=\"note\">No frames.</p>");
        return;
    }
    h.raw("<div class=\"tree-tools\"></div><ol class=\"tree\">");
    // Gas used of the open frames, outermost first.
    let mut open: Vec<u64> = Vec::new();
    for t in traces.iter().take(MAX_FRAMES) {
        // A frame is a child of the last open frame at its depth; a depth past the open
        // frames (not in a well-formed trace) is taken as the deepest possible.
        let depth = t.trace_address.len().min(open.len());
        while open.len() > depth {
            h.raw("</ol></details></li>");
            open.pop();
        }
        let f = Frame::of(t);
        let parent_gas = open.last().copied().or(root_gas);
        frame_open(h, t, &f, parent_gas);
        open.push(f.gas_used.unwrap_or(0));
    }
    for _ in open {
        h.raw("</ol></details></li>");
    }
    h.raw("</ol>");
    if traces.len() > MAX_FRAMES {
        h.raw("<p class=\"note\">")
            .text(&grouped(traces.len() - MAX_FRAMES))
            .raw(" more frames are not shown; trace_transaction has them all.</p>");
    }
}

/// A frame's `<li><details>`, its summary line, its details, and the opening of its children's
/// list.
fn frame_open(h: &mut Html, t: &TransactionTrace, f: &Frame<'_>, parent_gas: Option<u64>) {
    let path = t.trace_address.iter().map(ToString::to_string).collect::<Vec<_>>().join(".");
    h.raw("<li><details class=\"frame\" open data-path=\"").text(&path);
    if let Some(g) = f.gas_used {
        h.raw("\" data-gas-used=\"").num(g);
    }
    h.raw("\"><summary><span class=\"kind k-").raw(f.kind).raw("\">").raw(f.kind).raw("</span> ");
    h.raw("<span class=\"from\">");
    address_link(h, &f.from);
    h.raw("</span>");
    if f.kind != "reward" {
        h.raw(" <span class=\"arrow\">→</span> <span class=\"to\">");
        match f.to {
            Some(to) => address_link(h, &to),
            None => {
                h.raw("<span class=\"note\">no contract</span>");
            }
        }
        h.raw("</span>");
    }
    if !f.value.is_zero() {
        h.raw(" <span class=\"value\" title=\"").show(f.value).raw(" wei\">");
        h.text(&ether(f.value)).raw("</span>");
    }
    if let Some(input) = f.input {
        h.raw(" <span class=\"input\">");
        if f.creates() {
            h.raw("init ");
        } else if input.len() >= 4 {
            h.raw("<code class=\"sel\">0x").text(&alloy_primitives::hex::encode(&input[..4]));
            h.raw("</code> ");
        }
        h.raw("<span class=\"len\">").text(&bytes(input.len())).raw("</span></span>");
    }
    if let Some(used) = f.gas_used {
        let of = parent_gas.unwrap_or(used).max(used).max(1);
        h.raw(" <span class=\"gas\"><span class=\"gas-used\">").text(&grouped(used));
        h.raw("</span> gas <meter min=\"0\" max=\"").num(of).raw("\" value=\"").num(used);
        h.raw("\" title=\"").text(&bar_title(t.trace_address.is_empty(), used, of, parent_gas));
        h.raw("\"></meter></span>");
    }
    if let Some(why) = failure(f) {
        h.raw(" <span class=\"error\">").text(&why).raw("</span>");
    }
    h.raw("</summary>");
    frame_details(h, t, f);
    h.raw("<ol class=\"tree\">");
}

/// What a frame's gas bar is relative to, as its tooltip says: a frame's caller's gas used;
/// the top frame has no caller, so its bar is relative to the transaction's gas used, or is
/// whole (a simulated call).
fn bar_title(top: bool, used: u64, of: u64, parent_gas: Option<u64>) -> String {
    match (top, parent_gas) {
        (false, _) => format!("{} of the {} gas its caller used", percent(used, of), grouped(of)),
        (true, Some(_)) => {
            format!("{} of the {} gas the transaction used", percent(used, of), grouped(of))
        }
        (true, None) => format!(
            "the top frame used {} gas: the scale of the bars of the frames it called",
            grouped(used)
        ),
    }
}

/// A frame's full input and output, closed by default.
fn frame_details(h: &mut Html, t: &TransactionTrace, f: &Frame<'_>) {
    h.raw("<details class=\"io\"><summary>details</summary><dl>");
    h.raw("<dt>path</dt><dd>");
    if t.trace_address.is_empty() {
        h.raw("top frame");
    } else {
        h.text(&t.trace_address.iter().map(ToString::to_string).collect::<Vec<_>>().join(" › "));
    }
    h.raw("</dd>");
    if let Some(gas) = f.gas {
        h.raw("<dt>gas given</dt><dd>").text(&grouped(gas)).raw("</dd>");
    }
    if let Action::Selfdestruct(_) = t.action {
        h.raw("<dt>balance left</dt><dd>").text(&ether(f.value)).raw("</dd>");
    }
    if let Some(input) = f.input {
        h.raw(if f.creates() { "<dt>init code</dt><dd>" } else { "<dt>input</dt><dd>" });
        hex_text(h, input);
        h.raw("</dd>");
    }
    if let Some(output) = f.output {
        let created = f.creates() && f.error.is_none();
        h.raw(if created { "<dt>code</dt><dd>" } else { "<dt>output</dt><dd>" });
        hex_text(h, output);
        if !created && let Some(note) = output_note(output, f.error == Some("Reverted")) {
            h.raw(" <span class=\"decoded\">").text(&note).raw("</span>");
        }
        h.raw("</dd>");
    }
    if let Some(error) = f.error {
        h.raw("<dt>error</dt><dd class=\"error\">").text(error).raw("</dd>");
    }
    h.raw("</dl></details>");
}

/// The output of a whole transaction or call: hex, and what it says.
pub(crate) fn output(h: &mut Html, output: &Bytes, reverted: bool) {
    h.raw("<div class=\"output\">");
    hex_text(h, output);
    if let Some(note) = output_note(output, reverted) {
        let class = if reverted { "error" } else { "decoded" };
        h.raw(" <span class=\"").raw(class).raw("\">").text(&note).raw("</span>");
    }
    h.raw("</div>");
}

/// The state diff as a table: one row per changed balance, nonce, code and storage slot.
pub(crate) fn state_diff(h: &mut Html, diff: &StateDiff) {
    let mut rows = 0usize;
    let total: usize = diff.values().map(changed_rows).sum();
    if total == 0 {
        h.raw("<p class=\"note\">No state changed.</p>");
        return;
    }
    h.raw("<div class=\"scroll\"><table class=\"diff\"><thead><tr><th>account</th>");
    h.raw("<th>what</th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>");
    'accounts: for (address, account) in diff.iter() {
        let mut row = |h: &mut Html, field: &'static str, slot: Option<&B256>| -> bool {
            if rows == MAX_DIFF_ROWS {
                return false;
            }
            rows += 1;
            h.raw("<tr data-address=\"").show(address).raw("\" data-field=\"").raw(field);
            if let Some(slot) = slot {
                h.raw("\" data-slot=\"").show(slot);
            }
            h.raw("\"><td>");
            address_link(h, address);
            h.raw("</td><td>");
            match slot {
                Some(slot) => {
                    h.raw("slot ");
                    compact_word(h, slot);
                }
                None => {
                    h.raw(field);
                }
            }
            h.raw("</td>");
            true
        };
        if !matches!(account.balance, Delta::Unchanged) {
            if !row(h, "balance", None) {
                break 'accounts;
            }
            delta(h, &account.balance, |h, v| {
                h.raw("<span title=\"").show(v).raw(" wei\">").text(&ether(*v)).raw("</span>");
            });
            balance_change(h, &account.balance);
            h.raw("</tr>");
        }
        if !matches!(account.nonce, Delta::Unchanged) {
            if !row(h, "nonce", None) {
                break 'accounts;
            }
            delta(h, &account.nonce, |h, v: &U64| {
                h.show(v);
            });
            h.raw("<td></td></tr>");
        }
        if !matches!(account.code, Delta::Unchanged) {
            if !row(h, "code", None) {
                break 'accounts;
            }
            delta(h, &account.code, |h, code| {
                h.text(&bytes(code.len()));
                if !code.is_empty() {
                    h.raw(" <code class=\"data\">0x");
                    h.text(&alloy_primitives::hex::encode(&code[..code.len().min(8)]));
                    h.raw(if code.len() > 8 { "…</code>" } else { "</code>" });
                }
            });
            h.raw("<td></td></tr>");
        }
        for (slot, value) in &account.storage {
            if matches!(value, Delta::Unchanged) {
                continue;
            }
            if !row(h, "storage", Some(slot)) {
                break 'accounts;
            }
            delta(h, value, word_cell);
            h.raw("<td></td></tr>");
        }
    }
    h.raw("</tbody></table></div>");
    if total > rows {
        h.raw("<p class=\"note\">")
            .text(&grouped(total - rows))
            .raw(" more changes are not shown; trace_replayTransaction has them all.</p>");
    }
}

/// Rows an account's diff takes.
fn changed_rows(a: &AccountDiff) -> usize {
    usize::from(!matches!(a.balance, Delta::Unchanged))
        + usize::from(!matches!(a.nonce, Delta::Unchanged))
        + usize::from(!matches!(a.code, Delta::Unchanged))
        + a.storage.values().filter(|d| !matches!(d, Delta::Unchanged)).count()
}

/// A 32-byte word without its leading zeros (`0x3e8`; the whole word in its title), and its
/// number when it is small enough to read as one.
fn word_cell(h: &mut Html, word: &B256) {
    compact_word(h, word);
    let n = U256::from_be_bytes(word.0);
    if n < U256::from(u128::MAX) {
        h.raw(" <span class=\"decoded\">= ").show(n).raw("</span>");
    }
}

/// A word as `0x` and its hex digits without leading zeros, the whole word in its title.
fn compact_word(h: &mut Html, word: &B256) {
    h.raw("<code class=\"word\" title=\"").show(word).raw("\">");
    h.show(format_args!("{:#x}", U256::from_be_bytes(word.0))).raw("</code>");
}

/// The before and after cells of a change.
fn delta<T>(h: &mut Html, d: &Delta<T>, cell: impl Fn(&mut Html, &T)) {
    let absent = |h: &mut Html| {
        h.raw("<span class=\"note\">none</span>");
    };
    h.raw("<td class=\"before\">");
    match d {
        Delta::Changed(c) => cell(h, &c.from),
        Delta::Removed(v) => cell(h, v),
        Delta::Added(_) | Delta::Unchanged => absent(h),
    }
    h.raw("</td><td class=\"after\">");
    match d {
        Delta::Changed(c) => cell(h, &c.to),
        Delta::Added(v) => cell(h, v),
        Delta::Removed(_) | Delta::Unchanged => absent(h),
    }
    h.raw("</td>");
}

/// A balance's change, signed, after its cells.
fn balance_change(h: &mut Html, d: &Delta<U256>) {
    let (from, to) = match d {
        Delta::Changed(c) => (c.from, c.to),
        Delta::Added(v) => (U256::ZERO, *v),
        Delta::Removed(v) => (*v, U256::ZERO),
        Delta::Unchanged => return,
    };
    h.raw("<td class=\"change\">");
    if to >= from {
        h.raw("+").text(&ether(to - from));
    } else {
        h.raw("−").text(&ether(from - to));
    }
    h.raw("</td>");
}

/// One frame as a row of an address's traces: block, transaction, path, kind, parties,
/// value, gas used, failure.
pub(crate) fn frame_row(h: &mut Html, t: &TransactionTrace, block: Option<u64>, tx: Option<&B256>) {
    let f = Frame::of(t);
    h.raw("<tr><td>");
    if let Some(n) = block {
        h.raw("<a href=\"/explorer/block/").num(n).raw("\">").num(n).raw("</a>");
    }
    h.raw("</td><td>");
    match tx {
        Some(hash) => {
            h.raw("<a class=\"hash\" href=\"/explorer/tx/").show(hash).raw("\">");
            h.show(hash).raw("</a>");
        }
        None => {
            h.raw("<span class=\"note\">block</span>");
        }
    }
    h.raw("</td><td>");
    if t.trace_address.is_empty() {
        h.raw("top");
    } else {
        h.text(&t.trace_address.iter().map(ToString::to_string).collect::<Vec<_>>().join("."));
    }
    h.raw("</td><td><span class=\"kind k-").raw(f.kind).raw("\">").raw(f.kind);
    h.raw("</span></td><td>");
    address_link(h, &f.from);
    h.raw("</td><td>");
    if let Some(to) = f.to {
        address_link(h, &to);
    }
    h.raw("</td><td>").text(&ether(f.value)).raw("</td><td>");
    if let Some(used) = f.gas_used {
        h.text(&grouped(used));
    }
    h.raw("</td><td>");
    if let Some(why) = failure(&f) {
        h.raw("<span class=\"error\">").text(&why).raw("</span>");
    }
    h.raw("</td></tr>");
}

/// Data as a hex block (logs).
pub(crate) fn data_block(h: &mut Html, data: &[u8]) {
    if data.is_empty() {
        h.raw("<span class=\"note\">none</span>");
    } else {
        hex_text(h, data);
    }
}
