//! Smoke test of the in-process harness.
use crate::support;

#[test]
fn chain_id_from_fixture() {
    let Some(node) = support::Node::start(|_| {}) else { return };
    assert_eq!(node.call("eth_chainId", serde_json::json!([])).unwrap(), "0xc72dd9d5e883e");
}
