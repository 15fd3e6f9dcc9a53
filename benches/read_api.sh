#!/usr/bin/env bash
# eth_getLogs, eth_estimateGas and debug_traceTransaction(callTracer) over HTTP on a generated
# chain (default 10,000 blocks of 20 transactions; Token `Transfer` and pool `Swap` logs).
# Prints markdown for BENCHMARKS.md: whole-range eth_getLogs latency (median of 5) by address
# and by topic, then wrk at c=8 for 100-block eth_getLogs queries and for estimate / callTracer
# / trace_call on the same token transfers.
# Usage: benches/read_api.sh [BLOCKS] [DURATION_SECONDS]   (LOUPE_BIN=path skips the build;
# READ_WORK=dir keeps the generated chain and datadir between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
BLOCKS="${1:-10000}"
DUR="${2:-10}"
PORT="${PORT:-18546}"
URL="http://127.0.0.1:$PORT/"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
WORK="${READ_WORK:-$(mktemp -d)}"
gen="$WORK/gen-$BLOCKS"
db="$WORK/db-$BLOCKS"
if [ ! -f "$gen/chain.rlp" ]; then
  "$BIN" generate --out "$gen" --accounts 10000 --blocks "$BLOCKS" --txs-per-block 20 >/dev/null 2>&1
fi
if [ ! -d "$db" ]; then
  "$BIN" import --datadir "$db" --genesis "$gen/genesis.json" "$gen/chain.rlp" >/dev/null 2>&1
fi
"$BIN" node --datadir "$db" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 --rpc.max-logs 10000000 &
NODE=$!
trap 'kill $NODE 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s "$URL" -o /dev/null && break; sleep 0.1; done
post() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL"; }
TOKEN=0x6c6f757065000000000000000000000000000001
TRANSFER=0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef
NOBODY=0x00000000000000000000000000000000000000aa
whole() { # $1 name, $2 filter JSON
  local body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getLogs\",\"params\":[$2]}"
  local n; n=$( (post "$body" | grep -o '"logIndex"' || true) | wc -l)
  local times=()
  for _ in 1 2 3 4 5; do
    times+=("$(curl -s -o /dev/null -w '%{time_total}' -H 'Content-Type: application/json' -d "$body" "$URL")")
  done
  local med; med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
  printf '| %s | %s | %s | %.0f ms |\n' "$1" "$BLOCKS" "$n" "$(echo "$med * 1000" | bc -l)"
}
echo "| eth_getLogs over the whole chain | blocks | logs | median latency |"
echo "|---|---|---|---|"
whole "address = Token" "{\"fromBlock\":\"0x0\",\"toBlock\":\"latest\",\"address\":\"$TOKEN\"}"
whole "topic0 = Transfer" "{\"fromBlock\":\"0x0\",\"toBlock\":\"latest\",\"topics\":[\"$TRANSFER\"]}"
whole "address with no logs" "{\"fromBlock\":\"0x0\",\"toBlock\":\"latest\",\"address\":\"$NOBODY\"}"
whole "no filter" "{\"fromBlock\":\"0x0\",\"toBlock\":\"latest\"}"

# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
run() { # $1 name, $2 bodies file
  local out; out=$(wrk -t2 -c8 -d"${DUR}s" --latency -s "$(lua "$2")" "$URL")
  printf '| %s | 8 | %s | %s | %s |\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")"
}
: > "$WORK/logs100.txt"
for i in $(seq 200); do
  s=$(( (RANDOM * 32768 + RANDOM) % (BLOCKS - 100) + 1 ))
  printf '{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x%x","toBlock":"0x%x","address":"%s"}]}\n' "$s" $((s + 99)) "$TOKEN" >> "$WORK/logs100.txt"
done
# Token transfers of the chain's last 50 blocks: their hashes, and the same calls as call objects
# at their parent blocks.
: > "$WORK/est.txt"; : > "$WORK/cc.txt"; : > "$WORK/tc.txt"
for b in $(seq $((BLOCKS - 49)) "$BLOCKS"); do
  post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockByNumber\",\"params\":[\"$(printf '0x%x' "$b")\",true]}" \
    | python3 -c '
import json, sys
b = json.load(sys.stdin)["result"]
for t in b["transactions"]:
    if (t.get("to") or "").lower() != sys.argv[1] or not t["input"].startswith("0xa9059cbb"):
        continue
    parent = hex(int(b["number"], 16) - 1)
    call = {"from": t["from"], "to": t["to"], "input": t["input"]}
    est = {"jsonrpc": "2.0", "id": 1, "method": "eth_estimateGas", "params": [call, parent]}
    cc = {"jsonrpc": "2.0", "id": 1, "method": "debug_traceTransaction", "params": [t["hash"], {"tracer": "callTracer"}]}
    tc = {"jsonrpc": "2.0", "id": 1, "method": "trace_call", "params": [call, ["trace"], parent]}
    for name, body in (("est", est), ("cc", cc), ("tc", tc)):
        open(sys.argv[2] + "/" + name + ".txt", "a").write(json.dumps(body) + "\n")
' "$TOKEN" "$WORK"
done
echo
echo "| request | c | req/s | p50 | p99 |"
echo "|---|---|---|---|---|"
run "eth_getLogs, 100 blocks, address = Token" "$WORK/logs100.txt"
run "eth_estimateGas (token transfer)" "$WORK/est.txt"
run "debug_traceTransaction callTracer (same)" "$WORK/cc.txt"
run "trace_call [trace] (same)" "$WORK/tc.txt"
