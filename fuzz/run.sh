#!/usr/bin/env bash
# Builds loupe's fuzz targets with libFuzzer on stable Rust (the coverage instrumentation
# cargo-fuzz asks rustc for, without its nightly-only sanitizer flags) and runs one:
#   fuzz/run.sh TARGET [libFuzzer flags...]     e.g. fuzz/run.sh params -max_total_time=60
# Targets: http_request, params, block_import, upstream_decode. New inputs go to
# fuzz/corpus/TARGET (committed); seeds made from the dev chain to fuzz/seeds/TARGET (not
# committed); crashes to fuzz/artifacts/TARGET. FUZZING.md records the long runs.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET [libFuzzer flags]}
shift
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR="${LOUPE_FUZZ_TARGET_DIR:-$PWD/target}"
# An explicit --target keeps the instrumentation out of build scripts and proc macros.
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --locked --release --target "$host" --bin "$target" >&2
mkdir -p "corpus/$target" "artifacts/$target"
rm -rf "seeds/$target"
export LOUPE_FUZZ_SEEDS="$PWD/seeds/$target"
# Seeds are written by the target's init, before libFuzzer reads the directories.
exec "$CARGO_TARGET_DIR/$host/release/$target" -artifact_prefix="artifacts/$target/" -timeout=20 \
  -rss_limit_mb=4096 "$@" "corpus/$target" "seeds/$target"
