//! Stateless execution of real mainnet (and Hoodi) blocks from their witnesses (issue 61's
//! fixtures, `../shared/fixtures/mainnet-witness/`): gas used, receipts root, bloom and the
//! post-state root must equal each block's header, which is the independent truth here.

use std::path::{Path, PathBuf};

use loupe::chain::{ChainSpec, Network};
use loupe::witness::{WitnessError, load_witness, parse_block, read_witness_file, run_block};

/// `$LOUPE_WITNESS_FIXTURES`, else `<repo>/../shared/fixtures/mainnet-witness`. Missing: a
/// panic under CI, a skipped test otherwise.
fn fixtures() -> Option<PathBuf> {
    let dir = match std::env::var_os("LOUPE_WITNESS_FIXTURES") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/mainnet-witness"),
    };
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    let msg = format!("mainnet-witness fixtures not found at {}", dir.display());
    if std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1") {
        panic!("{msg}");
    }
    eprintln!("note: skipping test: {msg}");
    None
}

fn mainnet() -> ChainSpec {
    ChainSpec::named(Network::Mainnet).expect("mainnet spec")
}

const ZETH: [u64; 5] = [1_150_000, 1_920_000, 4_370_000, 15_537_394, 19_426_587];

#[test]
fn zeth_blocks_execute_statelessly_to_their_header_roots() {
    let Some(dir) = fixtures() else { return };
    let spec = mainnet();
    for n in ZETH {
        let loaded = read_witness_file(&dir.join(format!("zeth/{n}.json.gz"))).expect("reads");
        let block = loaded.block.expect("zeth files hold the block");
        assert_eq!(block.header.number, n);
        let out =
            run_block(&spec, &loaded.witness, &block).unwrap_or_else(|e| panic!("block {n}: {e}"));
        assert_eq!(out.state_root, block.header.state_root, "block {n}");
        assert_eq!(out.receipts.len(), block.body.transactions.len(), "block {n}");
    }
}
