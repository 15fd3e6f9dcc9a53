#!/usr/bin/env bash
# The Parity trace namespace over HTTP on a generated chain (default 10,000 blocks of 20
# transactions). Prints markdown for BENCHMARKS.md: trace_block and
# trace_replayBlockTransactions(["trace","stateDiff"]) of full blocks (latency at c=1, median of
# 20; req/s at c=8), trace_transaction req/s at c=8, and trace_filter over the whole chain for
# one account (index-served) and for the Token contract (in every block), median of 5.
# Usage: benches/trace_api.sh [BLOCKS] [DURATION_SECONDS]   (LOUPE_BIN=path skips the build;
# TRACE_WORK=dir keeps the generated chain and datadir between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
BLOCKS="${1:-10000}"
DUR="${2:-10}"
PORT="${PORT:-18547}"
URL="http://127.0.0.1:$PORT/"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
WORK="${TRACE_WORK:-$(mktemp -d)}"
gen="$WORK/gen-$BLOCKS"
db="$WORK/trace-db-$BLOCKS"
if [ ! -f "$gen/chain.rlp" ]; then
  "$BIN" generate --out "$gen" --accounts 10000 --blocks "$BLOCKS" --txs-per-block 20 >/dev/null 2>&1
fi
if [ ! -d "$db" ]; then
  "$BIN" import --datadir "$db" --genesis "$gen/genesis.json" "$gen/chain.rlp" >/dev/null 2>&1
fi
"$BIN" node --datadir "$db" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 --rpc.evm-timeout 60 \
  --trace.max-filter-results 1000000 &
NODE=$!
trap 'kill $NODE 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s "$URL" -o /dev/null && break; sleep 0.1; done
post() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL"; }
TOKEN=0x6c6f757065000000000000000000000000000001
median() { # $1 body, $2 runs: median latency in ms
  local times=()
  for _ in $(seq "$2"); do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' -H 'Content-Type: application/json' -d "$1" "$URL")")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( ($2 + 1) / 2 ))p" | awk '{printf "%.1f", $1 * 1000}'
}
count() { post "$1" | grep -o '"traceAddress"' | wc -l; }

# Bodies: 200 random full blocks for each block method, and the transactions of 50 of them.
: > "$WORK/tb.txt"; : > "$WORK/rb.txt"; : > "$WORK/tt.txt"
for _ in $(seq 200); do
  b=$(printf '0x%x' $(( (RANDOM * 32768 + RANDOM) % BLOCKS + 1 )))
  echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_block\",\"params\":[\"$b\"]}" >> "$WORK/tb.txt"
  echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_replayBlockTransactions\",\"params\":[\"$b\",[\"trace\",\"stateDiff\"]]}" >> "$WORK/rb.txt"
done
for i in $(seq 50); do
  b=$(printf '0x%x' $(( BLOCKS - i * 97 % BLOCKS )))
  post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockByNumber\",\"params\":[\"$b\",false]}" \
    | python3 -c '
import json, sys
for h in json.load(sys.stdin)["result"]["transactions"]:
    print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "trace_transaction", "params": [h]}))
' >> "$WORK/tt.txt"
done
mid=$(printf '0x%x' $(( BLOCKS / 2 )))
txs=$(post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockByNumber\",\"params\":[\"$mid\",true]}")
ACCOUNT=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["result"]["transactions"][0]["from"])' "$txs")
ntx=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["result"]["transactions"]))' "$txs")

echo "| request (block $mid: $ntx transactions) | c | median latency |"
echo "|---|---|---|"
tb="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_block\",\"params\":[\"$mid\"]}"
rb="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_replayBlockTransactions\",\"params\":[\"$mid\",[\"trace\",\"stateDiff\"]]}"
echo "| trace_block | 1 | $(median "$tb" 21) ms |"
echo "| trace_replayBlockTransactions [trace, stateDiff] | 1 | $(median "$rb" 21) ms |"

# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
run() { # $1 name, $2 bodies file
  local out; out=$(wrk -t2 -c8 -d"${DUR}s" --latency -s "$(lua "$2")" "$URL")
  printf '| %s | 8 | %s | %s | %s |\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")"
}
echo
echo "| request | c | req/s | p50 | p99 |"
echo "|---|---|---|---|---|"
run "trace_block (random full block)" "$WORK/tb.txt"
run "trace_replayBlockTransactions [trace, stateDiff] (same)" "$WORK/rb.txt"
run "trace_transaction (random transaction)" "$WORK/tt.txt"

last=$(printf '0x%x' "$BLOCKS")
fa="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_filter\",\"params\":[{\"fromBlock\":\"0x1\",\"toBlock\":\"$last\",\"fromAddress\":[\"$ACCOUNT\"]}]}"
ta="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_filter\",\"params\":[{\"fromBlock\":\"0x1\",\"toBlock\":\"$last\",\"toAddress\":[\"$TOKEN\"],\"count\":1000}]}"
na="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_filter\",\"params\":[{\"fromBlock\":\"0x1\",\"toBlock\":\"$last\",\"toAddress\":[\"0x00000000000000000000000000000000000000aa\"]}]}"
echo
echo "| trace_filter over blocks 1..$BLOCKS | traces | median latency (5 runs) |"
echo "|---|---|---|"
echo "| fromAddress = one account ($ACCOUNT) | $(count "$fa") | $(median "$fa" 5) ms |"
echo "| toAddress = Token, count 1000 (Token is in every block) | $(count "$ta") | $(median "$ta" 5) ms |"
echo "| toAddress = an address no block touches | $(count "$na") | $(median "$na" 5) ms |"
