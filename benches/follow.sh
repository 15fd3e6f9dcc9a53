#!/usr/bin/env bash
# Catch-up speed of `loupe follow` against `loupe import` of the same blocks. A generated chain
# is imported from its file into an upstream datadir (timed), served by `loupe node`, and a
# second datadir follows it from genesis (timed until its head is the upstream's). Prints
# blocks/s and Mgas/s of both and the fetch overhead per block. Usage:
#   benches/follow.sh [ACCOUNTS] [BLOCKS]        (default 10000 400)
# LOUPE_BIN=path uses that binary instead of building; FOLLOW_WORK=dir keeps the files.
set -euo pipefail
cd "$(dirname "$0")/.."
ACCOUNTS="${1:-10000}"
BLOCKS="${2:-400}"
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
WORK="${FOLLOW_WORK:-$(mktemp -d)}"
gen="$WORK/gen-$ACCOUNTS-$BLOCKS"
if [ ! -f "$gen/chain.rlp" ]; then
  "$BIN" generate --out "$gen" --accounts "$ACCOUNTS" --blocks "$BLOCKS" --txs-per-block 200 >/dev/null 2>&1
fi
rm -rf "$WORK/up" "$WORK/fo"
"$BIN" init --datadir "$WORK/up" --genesis "$gen/genesis.json" >/dev/null
"$BIN" init --datadir "$WORK/fo" --genesis "$gen/genesis.json" >/dev/null
imp=$("$BIN" import --datadir "$WORK/up" "$gen/chain.rlp" 2>/dev/null | tail -1)
echo "import: $imp"
imp_s=$(echo "$imp" | grep -o "in [0-9.]*s" | tr -dc '0-9.')
gas=$(echo "$imp" | grep -o "[0-9.]* Mgas)" | tr -dc '0-9.')
port_up=$((20000 + RANDOM % 10000)); port_fo=$((port_up + 1))
"$BIN" node --datadir "$WORK/up" --http.port "$port_up" >/dev/null 2>&1 &
up_pid=$!
trap 'kill $up_pid ${fo_pid:-} 2>/dev/null || true' EXIT
sleep 1
head() { curl -s -X POST -H 'Content-Type: application/json' \
  --data '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' "http://127.0.0.1:$1" \
  | grep -o '"result":"0x[0-9a-f]*"' | cut -d'"' -f4; }
start=$(date +%s.%N)
"$BIN" follow --datadir "$WORK/fo" --upstream "http://127.0.0.1:$port_up" --http.port "$port_fo" \
  --follow.poll-ms 50 >/dev/null 2>&1 &
fo_pid=$!
target=$(printf '0x%x' "$BLOCKS")
until [ "$(head "$port_fo" 2>/dev/null)" = "$target" ]; do sleep 0.05; done
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v i="$imp_s" -v b="$BLOCKS" -v g="$gas" 'BEGIN {
  f = e - s;
  printf "| path | seconds | blocks/s | Mgas/s |\n|---|---|---|---|\n";
  printf "| import (file) | %.2f | %.0f | %.0f |\n", i, b / i, g / i;
  printf "| follow (catch-up from loupe node) | %.2f | %.0f | %.0f |\n", f, b / f, g / f;
  printf "fetch overhead: %.2f ms per block (includes process start-up, about 0.1 s)\n", 1000 * (f - i) / b }'
