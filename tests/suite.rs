//! The integration tests, one module per concern, linked into one test binary: each binary
//! links the whole node statically (about 85 MB with line tables), and one binary per file took
//! over 4 GB of disk and a link each in CI. Run one concern with
//! `cargo nextest run --test suite -E 'test(/^import::/)'`.
#![allow(clippy::duplicate_mod, clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

mod abuse;
mod access_list;
mod amsterdam;
mod anchored;
mod clients;
mod config;
mod connections;
mod consensus;
mod consensus_cli;
mod crash;
mod db_snapshot;
mod dev_chain;
mod dev_upgrade;
mod disk_full;
mod era1;
mod explorer;
mod first_hour;
mod follow;
mod forks;
mod fuzz_corpus;
mod generate;
mod genesis;
mod geth_trace;
mod header_rules;
mod import;
mod metrics;
mod proof;
mod readme;
mod replicas;
mod rpc_conformance;
mod rpc_lookups;
mod rpc_read_api;
mod rpc_transport;
mod scale;
mod segments;
mod shutdown;
mod smoke;
mod trace_golden;
mod trace_namespace;
mod trace_rules;
mod trie;
mod trie_stage;
mod unwind;
mod verify;
mod witness_archive;
mod witness_cli;
mod witness_mainnet;
mod ws;
