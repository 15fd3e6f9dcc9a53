#!/usr/bin/env bash
# Reads at old blocks over HTTP: eth_getProof, eth_getBalance and trace_call (transfer,
# trace+stateDiff) of one account at each listed block, wrk on loopback: p50 latency at c=1 and
# req/s at c=8. For comparing history layouts on datadirs of the same chain.
# Usage: DATADIR=dir ACCOUNT=0x… BLOCKS="latest 0x7d0 0x12c" benches/history_reads.sh [SECONDS]
# FROM=0x… sends the trace_call from that account instead (ACCOUNT may be a contract, whose
# storage the proofs then cover, and hold no ether).
# LOUPE_BIN=path uses that binary instead of target/release/loupe.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${1:-3}"
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
PORT="${PORT:-18547}"
URL="http://127.0.0.1:$PORT/"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
WORK=$(mktemp -d)
"$BIN" node --datadir "$DATADIR" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 &
NODE=$!
trap 'kill $NODE 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do curl -s "$URL" -o /dev/null && break; sleep 0.1; done
# shellcheck source=benches/common/wrk.sh
source benches/common/wrk.sh
A="$ACCOUNT"
F="${FROM:-$ACCOUNT}"
echo "| block | method | p50 µs at c=1 | req/s at c=8 |"
echo "|---|---|---|---|"
for b in $BLOCKS; do
  printf '{"jsonrpc":"2.0","id":1,"method":"eth_getProof","params":["%s",["0x0","0x1"],"%s"]}\n' "$A" "$b" >"$WORK/proof"
  printf '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["%s","%s"]}\n' "$A" "$b" >"$WORK/balance"
  printf '{"jsonrpc":"2.0","id":1,"method":"trace_call","params":[{"from":"%s","to":"0x00000000000000000000000000000000000000aa","value":"0x1"},["trace","stateDiff"],"%s"]}\n' "$F" "$b" >"$WORK/trace"
  for m in proof balance trace; do
    curl -s -H 'Content-Type: application/json' -d @"$WORK/$m" "$URL" | grep -q '"result"' \
      || { echo "$m at $b did not answer with a result" >&2; exit 1; }
    p50=$(wrk -t1 -c1 -d"${DUR}s" --latency -s "$(lua "$WORK/$m")" "$URL" \
      | awk '$1 == "50%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v) } else if (v ~ /ms$/) { sub(/ms/, "", v); v *= 1000 }; print v }')
    rps=$(wrk -t2 -c8 -d"${DUR}s" -s "$(lua "$WORK/$m")" "$URL" | awk '/Requests\/sec/ { print int($2) }')
    echo "| $b | $m | $p50 | $rps |"
  done
done
