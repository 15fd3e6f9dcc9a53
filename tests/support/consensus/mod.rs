//! The consensus suites' plumbing, shared by `tests/consensus.rs` (which imports each test's
//! blocks in process) and `tests/consensus_cli.rs` (which drives the binary): where the fixture
//! archives are and which tests they hold ([`fixtures`]), a test's genesis and blocks
//! ([`genesis`]), the rule an invalid block must be refused by ([`rules`]), and the runner that
//! runs tests on all cores and prints the counts ([`runner`]).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod fixtures;
pub mod genesis;
pub mod rules;
pub mod runner;
