//! loupe: a lightweight Ethereum archive node serving `trace_call` and `eth_` reads over
//! JSON-RPC.
//!
//! Layers, each a module (a room) that may only use the ones below it (no upward import):
//!
//! | module    | does                                               | may use                                   |
//! |-----------|----------------------------------------------------|-------------------------------------------|
//! | `cli`     | command line, node start-up                        | everything                                |
//! | `dev`     | built-in dev chain: genesis, block builder         | `import`, `trie`, `evm`, `storage`, `chain` |
//! | `follow`  | following an upstream node's blocks through reorgs | `import`, `trie`, `evm`, `storage`, `chain` |
//! | `explorer`| pages served beside JSON-RPC (`/explorer/`)        | `rpc`, `storage`, `chain`                 |
//! | `rpc`     | JSON-RPC server and methods                        | `witness`, `trie`, `evm`, `storage`, `chain` |
//! | `witness` | execution witnesses: built from the archive, run statelessly | `trie`, `evm`, `storage`, `chain` |
//! | `import`  | genesis init, verified block import                | `trie`, `evm`, `storage`, `chain`         |
//! | `trie`    | incremental state root, proofs, trie verification  | `storage`                                 |
//! | `evm`     | block environments, block and call execution       | `chain`                                   |
//! | `storage` | redb tables, history, `StateAt`                    | nothing internal                          |
//! | `chain`   | chain spec and genesis from `genesis.json`         | nothing internal                          |
//!
//! `scripts/layering.sh` checks the rule with `grep` (every room needs its row there and here),
//! and `scripts/import-circles.py` that the files of a room use each other in no circle;
//! `.ci/run` runs both. `docs/design.md` describes the tables, the history lookup and the import
//! flow.
//!
//! The docs are meant to be read with private items (`cargo doc --document-private-items`): a
//! module's doc often points at the private function that does what it describes.
#![allow(rustdoc::private_intra_doc_links)]

pub mod chain;
pub mod cli;
pub mod dev;
pub mod evm;
pub mod explorer;
pub mod follow;
pub mod import;
pub mod rpc;
pub mod storage;
pub mod trie;
pub mod witness;
