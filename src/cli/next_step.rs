//! What a datadir still at its genesis needs next, and where its blocks come from: era1 files,
//! RLP chain files or an upstream node, never peers. `loupe init` prints it; `loupe node` logs
//! it at start-up.

use std::path::Path;

use crate::chain::{ChainSpec, Network};
use crate::cli::args::shell_word;

/// The list of servers that publish era1 files (eth-clients/history-endpoints).
const ERA1_ENDPOINTS: &str = "https://eth-clients.github.io/history-endpoints/";

/// An upstream URL for the examples: a node on this machine, as its default port serves.
const UPSTREAM: &str = "http://127.0.0.1:8545";

/// Where a network's era1 files are, and the last block they hold (the last proof-of-work
/// block: era1 files end at the merge). `None` for a network that started under proof of stake
/// or a chain of a genesis file.
fn era1(network: Option<Network>) -> Option<(&'static str, u64)> {
    let url = match network? {
        Network::Mainnet => "https://mainnet.era1.nimbus.team/",
        Network::Sepolia => "https://sepolia.era1.nimbus.team/",
        Network::Holesky | Network::Hoodi => return None,
    };
    let (first_pos, _) = network?.merge();
    Some((url, first_pos.checked_sub(1)?))
}

/// `n` with commas between groups of three digits.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What `loupe init` prints after initialising `datadir`: where blocks come from for this
/// chain, each way with the command that takes it.
pub(super) fn after_init(spec: &ChainSpec, datadir: &Path) -> String {
    let dir = shell_word(&datadir.display().to_string());
    let mut out = String::from(
        "Next: get blocks. loupe has no peer-to-peer sync: its blocks come from files or from \
         another node's JSON-RPC.\n",
    );
    match era1(spec.network()) {
        Some((url, last)) => {
            let name = spec.network().map_or("", Network::name);
            out.push_str(&format!(
                "- {name}'s history before the merge, blocks 1 to {} (era1 files end at the last \
                 proof-of-work block), as era1 files of 8,192 blocks each: download them from \
                 {url} (other servers: {ERA1_ENDPOINTS}) into a folder, then\n    \
                 loupe import --datadir {dir} ./era1/\n",
                grouped(last)
            ));
            out.push_str(&format!(
                "- the blocks after it (or the whole chain, more slowly): follow a synced node \
                 (geth, reth, Nethermind, Erigon…), which fetches, executes and verifies every \
                 block, then keeps up with its head:\n    \
                 loupe follow --datadir {dir} --upstream {UPSTREAM}\n"
            ));
        }
        None if spec.network().is_some() => {
            let name = spec.network().map_or("", Network::name);
            out.push_str(&format!(
                "- {name} started under proof of stake, so it has no era1 history: follow a \
                 synced node (geth, reth, Nethermind, Erigon…), which fetches, executes and \
                 verifies every block, then keeps up with its head:\n    \
                 loupe follow --datadir {dir} --upstream {UPSTREAM}\n"
            ));
        }
        None => {
            out.push_str(&format!(
                "- RLP chain files (blocks concatenated, as `geth export` writes them), in \
                 order:\n    loupe import --datadir {dir} chain.rlp\n\
                 - or follow a node that serves this chain:\n    \
                 loupe follow --datadir {dir} --upstream {UPSTREAM}\n"
            ));
        }
    }
    out.push_str(&format!(
        "Then serve it: loupe node --datadir {dir} (loupe follow serves while it follows).\n"
    ));
    out
}

/// What `loupe node` logs at start-up on a datadir that holds only its genesis block.
pub(super) fn at_genesis(spec: &ChainSpec, datadir: &Path) -> String {
    let dir = shell_word(&datadir.display().to_string());
    let era1 = match era1(spec.network()) {
        Some((url, last)) => format!(
            "era1 files of blocks 1 to {} from {url} (`loupe import --datadir {dir} ./era1/`), \
             then ",
            grouped(last)
        ),
        None if spec.network().is_none() => {
            format!("RLP chain files (`loupe import --datadir {dir} chain.rlp`), or ")
        }
        None => String::new(),
    };
    format!(
        "{} holds only the genesis block (head 0): every block after it is unknown. loupe has \
         no peer-to-peer sync; blocks come from {era1}an upstream node \
         (`loupe follow --datadir {dir} --upstream URL`)",
        datadir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(grouped(15_537_393), "15,537,393");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
    }
}
