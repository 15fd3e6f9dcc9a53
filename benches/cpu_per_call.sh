#!/usr/bin/env bash
# One point of the side by side, for comparing two loupe builds quickly (issue 42): imports the
# fixture chain, starts `loupe node` with the given flags, loads one body with wrk for SECONDS
# at concurrency C after a 1 s warm-up, and prints req/s and the node's own CPU time per call
# (utime + stime from /proc/PID/stat). CASE is `floor` (web3_clientVersion), `lookup`
# (eth_getTransactionByBlockNumberAndIndex over every transaction of blocks 1-54, as the side by
# side loads it), a trace_call case of benches/common/calls.rs (emit, nested_create, ...) at
# the latest block, `eth_call:` and such a case for the same call as eth_call, or a file holding
# one request body. It also prints the cores' cache-line round trip just before the load
# (examples/core_pingpong.rs): the host moves the two vCPUs between near and far placements,
# and the CPU per call moves with it.
# Usage: benches/cpu_per_call.sh LOUPE_BIN CASE C SECONDS [node flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$1 CASE=$2 C=$3 DUR=$4
shift 4
FX="${LOUPE_FIXTURES:-$PWD/../shared/fixtures/execution-apis}"
PORT="${PORT:-18701}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
WORK=$(mktemp -d)
"$BIN" import --datadir "$WORK/d" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null 2>&1
"$BIN" node --datadir "$WORK/d" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 "$@" &
PID=$!
trap 'kill $PID; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -s "http://127.0.0.1:$PORT/" -o /dev/null && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT/"
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
if [ "$CASE" = floor ]; then
  echo '{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[]}' >"$WORK/b"
elif [ -f "$CASE" ]; then
  cp "$CASE" "$WORK/b"
elif [ "$CASE" = lookup ]; then
  lookup_bodies "$URL" "$(seq 1 54)" "$WORK/b"
else
  cargo build --release --locked --quiet --example bench_calls
  name=${CASE#eth_call:}
  params=$("${CARGO_TARGET_DIR:-target}/release/examples/bench_calls" latest \
    0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2 | awk -F'\t' -v c="$name" '$1 == c {print $2; exit}')
  [ -n "$params" ] || { echo "no trace_call case named $name" >&2; exit 1; }
  if [ "$name" = "$CASE" ]; then
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" >"$WORK/b"
  else
    # The same call as eth_call: its params without the trace types.
    python3 -c 'import json, sys; p = json.loads(sys.argv[1]); del p[1]
print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": p}))' "$params" >"$WORK/b"
  fi
fi
lua "$WORK/b" >/dev/null
cargo build --release --locked --quiet --example core_pingpong
rt=$("${CARGO_TARGET_DIR:-target}/release/examples/core_pingpong")
T=$((C < 2 ? 1 : 2))
wrk -t"$T" -c"$C" -d1s -s "$WORK/s.lua" "http://127.0.0.1:$PORT/" >/dev/null
ticks() { sed 's/.*) //' "/proc/$PID/stat" | awk '{print $12 + $13}'; }
a=$(ticks)
out=$(wrk -t"$T" -c"$C" -d"${DUR}s" -s "$WORK/s.lua" "http://127.0.0.1:$PORT/")
b=$(ticks)
n=$(awk '/requests in/ {print $1}' <<<"$out")
r=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
echo "$CASE c=$C $*: $r req/s, $(awk -v a="$a" -v b="$b" -v n="$n" -v hz="$(getconf CLK_TCK)" \
  'BEGIN {printf "%.1f", (b - a) / hz * 1e6 / n}') µs CPU/call (cores' round trip $rt ns)"
