#!/usr/bin/env bash
# Side by side (issue 14): the same request bodies against reth 2.5.1, loupe and a bare hyper
# server that answers each body with loupe's recorded response to it and does nothing else (the
# physical floor, examples/floor.rs), back to back per point,
# at c=1, 8 and 64, on the execution-apis fixture chain. Prints a markdown table with ratios.
# Usage: benches/sidebyside.sh [DURATION_SECONDS]
# reth: RETH=/path/to/reth, else ../shared/peers/reth-2.5.1-x86_64-linux-gnu.zst is unpacked
# (zstd from Debian). Without it the table has loupe and the floor only, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-10}"
FX="${LOUPE_FIXTURES:-$PWD/../shared/fixtures/execution-apis}"
PEERS="${LOUPE_PEERS:-$PWD/../shared/peers}"
P_RETH=18645 P_LOUPE=18646 P_FLOOR=18647
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --locked --quiet
cargo build --release --locked --quiet --example bench_calls --example floor
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

RETH="${RETH:-}"
if [ -z "$RETH" ] && [ -f "$PEERS/reth-2.5.1-x86_64-linux-gnu.zst" ]; then
  command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd; }
  zstd -q -d "$PEERS/reth-2.5.1-x86_64-linux-gnu.zst" -o "$WORK/reth" && chmod +x "$WORK/reth"
  RETH="$WORK/reth"
fi

wait_up() { for _ in $(seq 300); do curl -s "http://127.0.0.1:$1/" -o /dev/null && return 0; sleep 0.1; done; echo "port $1 never answered" >&2; exit 1; }

target/release/loupe import --datadir "$WORK/loupe" --genesis "$FX/genesis.json" "$FX/chain.rlp" >/dev/null
target/release/loupe node --datadir "$WORK/loupe" --http.port $P_LOUPE --log.filter warn &
PIDS+=($!); LOUPE_PID=$!
if [ -n "$RETH" ]; then
  "$RETH" init --chain "$FX/genesis.json" --datadir "$WORK/reth-data" >/dev/null 2>&1
  "$RETH" import --chain "$FX/genesis.json" --datadir "$WORK/reth-data" "$FX/chain.rlp" >/dev/null 2>&1
  "$RETH" node --chain "$FX/genesis.json" --datadir "$WORK/reth-data" --http --http.addr 127.0.0.1 \
    --http.port $P_RETH --http.api eth,net,web3,trace,debug --disable-discovery --no-persist-peers \
    --port 0 --authrpc.port 0 --ipcdisable --log.stdout.filter error >/dev/null 2>&1 &
  PIDS+=($!); RETH_PID=$!
  wait_up $P_RETH
fi
wait_up $P_LOUPE

URL="http://127.0.0.1:$P_LOUPE/"
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
post() { curl -s -H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:$1/"; }

rps() { # $1 port, $2 bodies, $3 concurrency: requests per second (non-2xx or errors fail)
  local t=$(( $3 < 2 ? 1 : 2 ))
  local out; out=$(wrk -t"$t" -c"$3" -d"${DUR}s" -s "$(lua "$2")" "http://127.0.0.1:$1/")
  if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx answers on port $1: $out" >&2; exit 1; fi
  awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out"
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
lookup_bodies "$URL" "$(seq 1 54)" "$WORK/lookup.txt"
ROWS=("web3_clientVersion" "lookup")
for block in latest 0xa; do
  while IFS=$'\t' read -r name params; do
    if [ "$block" != latest ] && [ "$name" != storage ]; then continue; fi
    printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":%s}\n' "$params" > "$WORK/trace_call $name @$block.txt"
    ROWS+=("trace_call $name @$block")
  done < <(target/release/examples/bench_calls "$block" "$FUNDED")
done

# The floor answers every body with loupe's response to it (examples/floor.rs): the bytes a node
# must send, without the work of producing them.
for row in "${ROWS[@]}"; do
  while IFS= read -r body; do
    printf '%s\t%s\n' "$body" "$(post $P_LOUPE "$body")"
  done < "$WORK/$row.txt"
done > "$WORK/answers.tsv"
target/release/examples/floor $P_FLOOR "$WORK/answers.tsv" &
PIDS+=($!)
wait_up $P_FLOOR

echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); ${DUR} s per point, wrk on loopback${RETH:+; reth: $("$RETH" --version | head -1)}"
[ -n "$RETH" ] || echo "reth not found (RETH unset, no $PEERS/reth-2.5.1-x86_64-linux-gnu.zst): loupe and the floor only"
echo
echo "| request | c | reth req/s | loupe req/s | loupe / reth | floor req/s | loupe / floor |"
echo "|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do
  file="$WORK/$row.txt"
  check "$file"
  for c in 1 8 64; do
    r="—"; [ -n "$RETH" ] && r=$(rps $P_RETH "$file" "$c")
    l=$(rps $P_LOUPE "$file" "$c")
    f=$(rps $P_FLOOR "$file" "$c")
    ratio="—"; [ -n "$RETH" ] && ratio=$(awk -v a="$l" -v b="$r" 'BEGIN{printf "**%.2f×**", a/b}')
    floor=$(awk -v a="$l" -v b="$f" 'BEGIN{printf "%.0f%%", 100*a/b}')
    echo "| $row | $c | $r | $l | $ratio | $f | $floor |"
  done
done
echo
echo "RSS after the runs: loupe $(( $(ps -o rss= -p "$LOUPE_PID") / 1024 )) MiB${RETH:+, reth $(( $(ps -o rss= -p "${RETH_PID:-0}") / 1024 )) MiB}"
