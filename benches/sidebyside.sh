#!/usr/bin/env bash
# Side by side (issues 14 and 42): the same request bodies (the floor, the lookup, three
# trace_calls, and one debug_traceCall) against reth 2.5.1 and loupe, back to
# back per point (reth first), at c=1, 8 and 64, on the execution-apis fixture chain. For each
# server and point: req/s, p50/p99 (wrk) and the server's own CPU per call, from its utime +
# stime in /proc/PID/stat before and after the run (what a provider pays for; unlike req/s it
# does not depend on wrk sharing the machine's cores). Then the in-process cost of each
# trace_call (benches/trace_call.rs, criterion medians), and both servers' RSS after the run.
# Prints markdown tables.
#
# Usage: benches/sidebyside.sh [DURATION_SECONDS]
# reth: RETH=/path/to/reth, else ../shared/peers/reth-2.5.1-x86_64-linux-gnu.zst is unpacked
# (zstd from Debian); without it the table has loupe only, and says so.
# LOUPE_BIN=/path/to/loupe measures that binary instead of building one; LOUPE_ARGS adds flags
# to `loupe node`; NO_INPROCESS=1 skips the criterion run.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-5}"
FX="${LOUPE_FIXTURES:-$PWD/../shared/fixtures/execution-apis}"
PEERS="${LOUPE_PEERS:-$PWD/../shared/peers}"
P_RETH=18645 P_LOUPE=18646
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --quiet --example bench_calls --example core_pingpong
LOUPE="${LOUPE_BIN:-}"
if [ -z "$LOUPE" ]; then
  cargo build --release --locked --quiet
  LOUPE="${CARGO_TARGET_DIR:-target}/release/loupe"
fi
BENCH_CALLS="${CARGO_TARGET_DIR:-target}/release/examples/bench_calls"
# The host's placement of the two cores (examples/core_pingpong.rs): ns a cache line takes from
# CPU 0 to CPU 1 and back. Every server's CPU per call moves with it (BENCHMARKS.md, session 44).
PINGPONG="${CARGO_TARGET_DIR:-target}/release/examples/core_pingpong"
RT_START=$("$PINGPONG")
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

# shellcheck source=benches/common/reth.sh
source benches/common/reth.sh
reth_unpack

"$LOUPE" import --datadir "$WORK/loupe" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null
# shellcheck disable=SC2086
"$LOUPE" node --datadir "$WORK/loupe" --http.port $P_LOUPE --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 ${LOUPE_ARGS:-} &
PIDS+=($!); LOUPE_PID=$!
[ -n "$RETH" ] && reth_fixture_node $P_RETH
wait_up $P_LOUPE

URL="http://127.0.0.1:$P_LOUPE/"
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
post() { curl -s -H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:$1/"; }

# CPU time (user + system, clock ticks) of process $1 so far: fields 14 and 15 of its stat,
# counted after the command name's closing parenthesis.
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
HZ=$(getconf CLK_TCK)

# $1 pid, $2 port, $3 bodies, $4 concurrency: "req/s p50 p99 µs-CPU-per-call" (non-2xx fails).
point() {
  local t=$(( $4 < 2 ? 1 : 2 ))
  local before after out
  before=$(ticks "$1")
  out=$(wrk -t"$t" -c"$4" -d"${DUR}s" --latency -s "$(lua "$3")" "http://127.0.0.1:$2/")
  after=$(ticks "$1")
  if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx answers on port $2: $out" >&2; exit 1; fi
  awk -v a="$before" -v b="$after" -v hz="$HZ" '
    /requests in/ {n = $1}
    /Requests\/sec/ {r = $2}
    $1 == "50%" {p50 = $2}
    $1 == "99%" {p99 = $2}
    END {printf "%.0f %s %s %.1f\n", r, p50, p99, (b - a) / hz * 1e6 / n}' <<<"$out"
}

# Every body must get a result (not an error) from every node before it is loaded.
check() { # $1 bodies file
  local body; body=$(head -1 "$1")
  for p in $P_LOUPE ${RETH:+$P_RETH}; do
    local out; out=$(post "$p" "$body")
    case "$out" in *'"result"'*) ;; *) echo "port $p: $body -> $out" >&2; exit 1;; esac
  done
}

FUNDED=0x14e46043e63d0e3cdcf2530519f4cfaf35058cb2
echo '{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion","params":[]}' > "$WORK/web3_clientVersion.txt"
lookup_bodies "$URL" "$(seq 1 54)" "$WORK/eth_getTransactionByBlockNumberAndIndex.txt"
ROWS=("web3_clientVersion" "eth_getTransactionByBlockNumberAndIndex")
for block in latest 0xa; do
  while IFS=$'\t' read -r name params; do
    case "$block $name" in "latest emit" | "latest nested_create" | "0xa emit") ;; *) continue;; esac
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" > "$WORK/trace_call $name @$block.txt"
    ROWS+=("trace_call $name @$block")
  done < <("$BENCH_CALLS" "$block" "$FUNDED")
done
# The emit call as debug_traceCall with geth's callTracer (its log included).
"$BENCH_CALLS" latest "$FUNDED" | awk -F'\t' '$1 == "emit" {print $2}' |
  sed 's/,\["trace","stateDiff"\],"latest"\]$/,"latest",{"tracer":"callTracer","tracerConfig":{"withLog":true}}]/' |
  awk '{printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"debug_traceCall\",\"params\":%s}\n", $0}' \
  > "$WORK/debug_traceCall emit callTracer.txt"
grep -q callTracer "$WORK/debug_traceCall emit callTracer.txt"
ROWS+=("debug_traceCall emit callTracer")

echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); ${DUR} s per point, wrk on loopback, reth then loupe per point${RETH:+; reth: $("$RETH" --version | head -1)}; loupe: $("$LOUPE" --version | head -1)${LOUPE_ARGS:+ $LOUPE_ARGS}"
[ -n "$RETH" ] || echo "reth not found (RETH unset, no $PEERS/reth-2.5.1-x86_64-linux-gnu.zst): loupe only"
echo "Cores' cache-line round trip (examples/core_pingpong.rs): $RT_START ns before the run"
echo
echo "| request | c | reth req/s | loupe req/s | loupe / reth req/s | reth p50 / p99 | loupe p50 / p99 | reth µs CPU/call | loupe µs CPU/call | reth / loupe CPU |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do
  file="$WORK/$row.txt"
  check "$file"
  for c in 1 8 64; do
    r=(— — — —); [ -n "$RETH" ] && read -r -a r <<<"$(point "$RETH_PID" $P_RETH "$file" "$c")"
    read -r -a l <<<"$(point "$LOUPE_PID" $P_LOUPE "$file" "$c")"
    rate="—" cpu="—"
    if [ -n "$RETH" ]; then
      rate=$(awk -v a="${l[0]}" -v b="${r[0]}" 'BEGIN{printf "%.2f×", a/b}')
      cpu=$(awk -v a="${r[3]}" -v b="${l[3]}" 'BEGIN{printf "**%.2f×**", a/b}')
    fi
    echo "| $row | $c | ${r[0]} | ${l[0]} | $rate | ${r[1]} / ${r[2]} | ${l[1]} / ${l[2]} | ${r[3]} | ${l[3]} | $cpu |"
  done
done
echo
echo "Cores' cache-line round trip after the run: $("$PINGPONG") ns"
echo "RSS after the runs: loupe $(( $(ps -o rss= -p "$LOUPE_PID") / 1024 )) MiB${RETH:+, reth $(( $(ps -o rss= -p "${RETH_PID:-0}") / 1024 )) MiB}"

[ -n "${NO_INPROCESS:-}" ] && exit 0
# The in-process cost of the same calls: no HTTP, no pool (criterion medians).
echo
echo "| trace_call, in process (benches/trace_call.rs) | median |"
echo "|---|---|"
cargo bench --locked --quiet --bench trace_call -- --warm-up-time 1 --measurement-time 3 --noplot \
  'trace_call/(emit/(latest|0xa)|nested_create/latest)$' 2>/dev/null |
  awk '/^trace_call\// {name = $1}
       /time:/ {for (i = 1; i <= NF; i++) if ($i == "time:") {v = $(i + 3); u = $(i + 4)}
                if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000
                printf "| %s | %.2f µs |\n", name, v}'
