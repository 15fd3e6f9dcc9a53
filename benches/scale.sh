#!/usr/bin/env bash
# Import cost against state size: for each state, a generated chain of the same block shape
# (200 mixed transactions per block) on top of a genesis of N accounts (or one contract with
# M slots), imported by a release loupe. Prints ms per block, Mgas/s, peak RSS of init and
# import, database size. Usage:
#   benches/scale.sh [BLOCKS] [STATE ...]   STATE = accounts:N | slots:M   (default: a sweep)
# Example: benches/scale.sh 50 accounts:10000 accounts:100000 accounts:1000000
# LOUPE_BIN=path uses that binary instead of building; SCALE_WORK=dir keeps generated chains.
set -euo pipefail
cd "$(dirname "$0")/.."
BLOCKS="${1:-50}"
shift || true
STATES=("${@:-accounts:10000 accounts:100000 accounts:1000000 accounts:10000000 slots:10000000}")
read -r -a STATES <<< "${STATES[*]}"
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
WORK="${SCALE_WORK:-$(mktemp -d)}"
echo "| state | init s | init peak RSS MiB | import ms/block | Mgas/s | import peak RSS MiB | db MiB |"
echo "|---|---|---|---|---|---|---|"
for state in "${STATES[@]}"; do
  kind="${state%%:*}"; n="${state##*:}"
  gen="$WORK/gen-$kind-$n-$BLOCKS"
  if [ ! -f "$gen/chain.rlp" ]; then
    if [ "$kind" = slots ]; then
      "$BIN" generate --out "$gen" --accounts 1000 --contract-slots "$n" --blocks "$BLOCKS" --txs-per-block 200 >/dev/null 2>&1
    else
      "$BIN" generate --out "$gen" --accounts "$n" --blocks "$BLOCKS" --txs-per-block 200 >/dev/null 2>&1
    fi
  fi
  db="$WORK/db-$kind-$n"
  rm -rf "$db"
  /usr/bin/time -v "$BIN" init --datadir "$db" --genesis "$gen/genesis.json" > "$WORK/init.log" 2>&1
  init_s=$(grep "Elapsed (wall" "$WORK/init.log" | awk '{print $NF}')
  init_rss=$(grep "Maximum resident" "$WORK/init.log" | awk '{printf "%d", $NF/1024}')
  /usr/bin/time -v "$BIN" import --datadir "$db" "$gen/chain.rlp" > "$WORK/import.log" 2>&1
  secs=$(grep -o "in [0-9.]*s" "$WORK/import.log" | head -1 | tr -dc '0-9.')
  mgas=$(grep -o "[0-9.]* Mgas/s" "$WORK/import.log" | head -1 | awk '{print $1}')
  rss=$(grep "Maximum resident" "$WORK/import.log" | awk '{printf "%d", $NF/1024}')
  size=$(du -sm "$db" | awk '{print $1}')
  ms=$(awk -v s="$secs" -v b="$BLOCKS" 'BEGIN{printf "%.1f", 1000*s/b}')
  echo "| $state | $init_s | $init_rss | $ms | $mgas | $rss | $size |"
  "$BIN" verify --datadir "$db" > /dev/null
  rm -rf "$db"
done
