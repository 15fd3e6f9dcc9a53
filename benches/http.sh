#!/usr/bin/env bash
# HTTP load benchmark: wrk against a release `loupe node` on the execution-apis fixture chain,
# or on another datadir.
# Usage: benches/http.sh [DURATION_SECONDS]   (prints markdown tables for BENCHMARKS.md)
# Other chains: DATADIR=dir (served as is, not imported), FUNDED=0x… (a funded sender of that
# chain), TX_BLOCKS="1 2 …" (blocks whose transactions are looked up), HIST=0x… (the old block
# of the historical trace_call), PROOF=0x… (an account for eth_getProof).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-10}"
FX="${LOUPE_FIXTURES:-$PWD/../shared/fixtures/execution-apis}"
PORT="${PORT:-18545}"
URL="http://127.0.0.1:$PORT/"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --quiet
cargo build --release --locked --quiet --example bench_calls
BIN=target/release/loupe
WORK=$(mktemp -d)
trap 'kill $NODE 2>/dev/null || true; rm -rf "$WORK"' EXIT
DB="${DATADIR:-$WORK/db}"
if [ -z "${DATADIR:-}" ]; then
  $BIN import --datadir "$DB" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null
fi
FUNDED="${FUNDED:-0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2}"
TX_BLOCKS="${TX_BLOCKS:-$(seq 1 54)}"
HIST="${HIST:-0x1e}"
PROOF="${PROOF:-$FUNDED}"
$BIN node --datadir "$DB" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 &
NODE=$!
for _ in $(seq 50); do curl -s "$URL" -o /dev/null && break; sleep 0.1; done

post() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL"; }

# Lua script that POSTs a random body from a file of one JSON body per line.
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh

run() { # $1 name, $2 bodies file, $3 concurrency
  local t=$(( $3 < 2 ? 1 : 2 ))
  local out; out=$(wrk -t"$t" -c"$3" -d"${DUR}s" --latency -s "$(lua "$2")" "$URL")
  local rps p50 p99 errs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errs=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  printf '| %s | %s | %s | %s | %s |%s\n' "$1" "$3" "$rps" "$p50" "$p99" "${errs:+ non-2xx: $errs}"
}

# Valid (block, index) pairs of the chain.
lookup_bodies "$URL" "$TX_BLOCKS" "$WORK/tx.txt"
echo '{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[]}' > "$WORK/floor.txt"

echo "| method | concurrency | req/s | p50 | p99 |"
echo "|---|---|---|---|---|"
for c in 1 8 64; do run web3_clientVersion "$WORK/floor.txt" "$c"; done
for c in 1 8 64; do run eth_getTransactionByBlockNumberAndIndex "$WORK/tx.txt" "$c"; done
for block in latest "$HIST"; do
  target/release/examples/bench_calls "$block" "$FUNDED" | while IFS=$'\t' read -r name params; do
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" > "$WORK/$name.txt"
    out=$(post "$(cat "$WORK/$name.txt")"); case "$out" in *'"error"'*) echo "trace_call $name failed: $out" >&2; exit 1;; esac
    for c in 1 2 8 64; do run "trace_call $name @$block" "$WORK/$name.txt" "$c"; done
  done
done
for block in latest "$HIST"; do
  printf '{"jsonrpc":"2.0","id":1,"method":"eth_getProof","params":["%s",["0x0","0x1"],"%s"]}\n' "$PROOF" "$block" > "$WORK/proof.txt"
  out=$(post "$(cat "$WORK/proof.txt")"); case "$out" in *'"error"'*) echo "eth_getProof failed: $out" >&2; exit 1;; esac
  for c in 1 8; do run "eth_getProof @$block" "$WORK/proof.txt" "$c"; done
done
echo
echo "node RSS after the runs: $(( $(ps -o rss= -p $NODE) / 1024 )) MiB"
