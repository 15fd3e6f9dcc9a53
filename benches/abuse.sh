#!/usr/bin/env bash
# Abuse (issue 60): a well-behaved client beside an attacker, against loupe and reth 2.5.1 on
# the execution-apis fixture chain, one server at a time. The good client is wrk at c=8 from
# 127.0.0.1 with the mixed read load of benches/sidebyside.sh (web3_clientVersion, every
# eth_getTransactionByBlockNumberAndIndex of blocks 1-54, three trace_calls, one debug_traceCall
# with callTracer), for DUR seconds quiet and then DUR seconds beside benches/abuse_attack.py
# (stalled bodies, heavy eth_getLogs, struct-logger calls of an endless loop, large state
# overrides, filter hoarding) from 127.0.0.2. For each server and run: the good client's
# req/s, p50/p99, error rate (socket errors, non-2xx and JSON-RPC errors over its requests),
# the server's CPU seconds over the run, and the server's peak RSS (VmHWM, reset before the run).
# Prints markdown tables and the attacker's outcome counts.
#
# Usage: benches/abuse.sh [DURATION_SECONDS]   (default 60)
# reth: RETH=/path/to/reth, else ../shared/peers/reth-2.5.1-x86_64-linux-gnu.zst is unpacked;
# without it (or with NO_RETH=1) loupe only. LOUPE_BIN=/path/to/loupe measures that binary;
# LOUPE_ARGS adds flags; ATTACKS=stalled,logs,structlog,overrides,filters runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-60}"
FX="${LOUPE_FIXTURES:-$PWD/../shared/fixtures/execution-apis}"
PEERS="${LOUPE_PEERS:-$PWD/../shared/peers}"
P_RETH=18655 P_LOUPE=18656
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --quiet --example bench_calls
LOUPE="${LOUPE_BIN:-}"
if [ -z "$LOUPE" ]; then
  cargo build --release --locked --quiet
  LOUPE="${CARGO_TARGET_DIR:-target}/release/loupe"
fi
BENCH_CALLS="${CARGO_TARGET_DIR:-target}/release/examples/bench_calls"
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

# shellcheck source=benches/common/reth.sh
source benches/common/reth.sh
[ -n "${NO_RETH:-}" ] && RETH="" || reth_unpack
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
HZ=$(getconf CLK_TCK)

"$LOUPE" import --datadir "$WORK/loupe" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null
# shellcheck disable=SC2086
"$LOUPE" node --datadir "$WORK/loupe" --http.port $P_LOUPE --log.filter warn ${LOUPE_ARGS:-} &
PIDS+=($!); LOUPE_PID=$!
[ -n "$RETH" ] && reth_fixture_node $P_RETH
wait_up $P_LOUPE

URL="http://127.0.0.1:$P_LOUPE/"
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
FUNDED=0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2
BODIES="$WORK/mixed.txt"
echo '{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[]}' > "$BODIES"
lookup_bodies "$URL" "$(seq 1 54)" "$WORK/lookups.txt"
cat "$WORK/lookups.txt" >> "$BODIES"
for block in latest 0xa; do
  while IFS=$'\t' read -r name params; do
    case "$block $name" in "latest emit" | "latest nested_create" | "0xa emit") ;; *) continue;; esac
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" >> "$BODIES"
  done < <("$BENCH_CALLS" "$block" "$FUNDED")
done
"$BENCH_CALLS" latest "$FUNDED" | awk -F'\t' '$1 == "emit" {print $2}' |
  sed 's/,\["trace","stateDiff"\],"latest"\]$/,"latest",{"tracer":"callTracer","tracerConfig":{"withLog":true}}]/' |
  awk '{printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"debug_traceCall\",\"params\":%s}\n", $0}' >> "$BODIES"
grep -q callTracer "$BODIES"

# The good client's script: a random body of $BODIES per request; counts answers that are
# not a 200 with a result.
cat > "$WORK/good.lua" <<LUA
local bodies = {}
for line in io.lines("$BODIES") do bodies[#bodies + 1] = line end
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function() return wrk.format(nil, "/", nil, bodies[math.random(#bodies)]) end
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format("bad %d socket %d\n", b, e.connect + e.read + e.write + e.timeout))
end
LUA

# $1 pid, $2 port, $3 "quiet" or "attacked": "req/s p50 p99 error% server-CPU-seconds peak-MiB"
run() {
  echo 5 > "/proc/$1/clear_refs"
  local before after out attacker=""
  if [ "$3" = attacked ]; then
    python3 benches/abuse_attack.py "$2" "$DUR" 127.0.0.2 > "$WORK/attack-$2.txt" &
    attacker=$!
    sleep 2 # the attack is under way before the measurement starts
  fi
  before=$(ticks "$1")
  out=$(wrk -t2 -c8 -d"${DUR}s" --timeout 10s --latency -s "$WORK/good.lua" "http://127.0.0.1:$2/")
  after=$(ticks "$1")
  local peak; peak=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status")
  [ -n "$attacker" ] && wait "$attacker"
  awk -v a="$before" -v b="$after" -v hz="$HZ" -v peak="$peak" '
    /requests in/ {n = $1}
    /Requests\/sec/ {r = $2}
    $1 == "50%" {p50 = $2}
    $1 == "99%" {p99 = $2}
    $1 == "bad" {bad = $2 + $4}
    END {printf "%.0f %s %s %.2f%% %.1f %s\n", r, p50, p99, 100 * bad / (n ? n : 1), (b - a) / hz, peak}' <<<"$out"
}

echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); ${DUR} s per run, wrk -t2 -c8 on loopback; loupe: $("$LOUPE" --version | head -1)${LOUPE_ARGS:+ $LOUPE_ARGS}${RETH:+; reth: $("$RETH" --version | head -1)}"
[ -n "$RETH" ] || echo "reth not found (RETH unset, no $PEERS/reth-2.5.1-x86_64-linux-gnu.zst): loupe only"
echo
echo "| server | run | good req/s | good p50 | good p99 | good errors | server CPU s in the run | server peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|"
servers=("loupe $LOUPE_PID $P_LOUPE")
[ -n "$RETH" ] && servers+=("reth $RETH_PID $P_RETH")
for s in "${servers[@]}"; do
  read -r name pid port <<<"$s"
  for mode in quiet attacked; do
    read -r -a m <<<"$(run "$pid" "$port" "$mode")"
    echo "| $name | $mode | ${m[0]} | ${m[1]} | ${m[2]} | ${m[3]} | ${m[4]} | ${m[5]} |"
  done
  # The attack's connections and filters drain before the next server's runs.
  sleep 5
done
echo
for s in "${servers[@]}"; do
  read -r name pid port <<<"$s"
  echo "$name, the attacker's outcomes:"
  sed 's/^/- /' "$WORK/attack-$port.txt"
  kill -0 "$pid" 2>/dev/null && echo "- $name was still up after the attack" || echo "- $name DIED during the attack"
done
