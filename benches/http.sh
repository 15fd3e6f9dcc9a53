#!/usr/bin/env bash
# HTTP load benchmark: wrk against a release `loupe node` on the execution-apis fixture chain.
# Usage: benches/http.sh [DURATION_SECONDS]   (prints markdown tables for BENCHMARKS.md)
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
$BIN import --datadir "$WORK/db" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null
$BIN node --datadir "$WORK/db" --http.port "$PORT" --log.filter warn &
NODE=$!
for _ in $(seq 50); do curl -s "$URL" -o /dev/null && break; sleep 0.1; done

post() { curl -s -H 'Content-Type: application/json' -d "$1" "$URL"; }

# Lua script that POSTs a random body from a file of one JSON body per line.
lua() { # $1 bodies file
  cat > "$WORK/s.lua" <<LUA
local bodies = {}
for line in io.lines("$1") do bodies[#bodies + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function() return wrk.format(nil, "/", nil, bodies[math.random(#bodies)]) end
LUA
  echo "$WORK/s.lua"
}

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
: > "$WORK/tx.txt"
for b in $(seq 1 54); do
  n=$(post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockTransactionCountByNumber\",\"params\":[\"$(printf '0x%x' "$b")\"]}" | sed -E 's/.*"result":"0x([0-9a-f]+)".*/\1/')
  for i in $(seq 0 $(( 16#$n - 1 ))); do
    printf '{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionByBlockNumberAndIndex","params":["0x%x","0x%x"]}\n' "$b" "$i" >> "$WORK/tx.txt"
  done
done
echo '{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[]}' > "$WORK/floor.txt"

echo "| method | concurrency | req/s | p50 | p99 |"
echo "|---|---|---|---|---|"
for c in 1 8 64; do run web3_clientVersion "$WORK/floor.txt" "$c"; done
for c in 1 8 64; do run eth_getTransactionByBlockNumberAndIndex "$WORK/tx.txt" "$c"; done
for block in latest 0x1e; do
  target/release/examples/bench_calls "$block" | while IFS=$'\t' read -r name params; do
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" > "$WORK/$name.txt"
    out=$(post "$(cat "$WORK/$name.txt")"); case "$out" in *'"error"'*) echo "trace_call $name failed: $out" >&2; exit 1;; esac
    for c in 1 2 8 64; do run "trace_call $name @$block" "$WORK/$name.txt" "$c"; done
  done
done
echo
echo "node RSS after the runs: $(( $(ps -o rss= -p $NODE) / 1024 )) MiB"
