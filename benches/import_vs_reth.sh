#!/usr/bin/env bash
# Import throughput, loupe against reth 2.5.1, on the same generated files, back to back.
# Usage: RETH=/path/to/reth benches/import_vs_reth.sh ACCOUNTS BLOCKS [SEED]
# LOUPE_PROOF_HISTORY=window initialises loupe's datadir without trie history below the unwind
# window (default: all).
# (reth: ../shared/peers, README there.) Prints wall time, Mgas/s, blocks/s, CPU time (user +
# system, all threads), peak RSS and datadir size for each node. loupe's figure includes init
# (the streamed genesis) separately, and the cores' cache-line round trip around the imports.
set -euo pipefail
cd "$(dirname "$0")/.."
ACCOUNTS="${1:?accounts}"; BLOCKS="${2:?blocks}"; SEED="${3:-1}"
RETH="${RETH:?set RETH to the reth 2.5.1 binary}"
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
# The cores' cache-line round trip (examples/core_pingpong.rs) before each import and after the
# last: the host moves its vCPUs between near and far placements, and threads that hand blocks
# to each other pay for the distance (BENCHMARKS.md, session 44).
cargo build --release --locked --quiet --example core_pingpong
pingpong() { "${CARGO_TARGET_DIR:-target}/release/examples/core_pingpong"; }
BIN="${LOUPE_BIN:-$PWD/target/release/loupe}"
WORK="${BENCH_WORK:-$(mktemp -d)}"
GEN="$WORK/gen-$ACCOUNTS-$BLOCKS-$SEED"
[ -f "$GEN/chain.rlp" ] || "$BIN" generate --out "$GEN" --accounts "$ACCOUNTS" --blocks "$BLOCKS" --seed "$SEED" >/dev/null 2>&1
measure() { # name, command...: prints "name seconds peak-KiB cpu-seconds", also kept in $WORK/times.txt
  local name=$1; shift
  if ! /usr/bin/time -f "%e %M %U %S" -o "$WORK/t" "$@" >"$WORK/$name.out" 2>&1; then
    echo "$name failed: $* (output: $WORK/$name.out)" >&2; tail -3 "$WORK/$name.out" >&2; exit 1
  fi
  read -r secs kb user sys < "$WORK/t"
  echo "$name $secs $kb $(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')" | tee -a "$WORK/times.txt"
}
# Datadirs get their own names: WORK may also hold the binaries (a reth binary named `reth`).
L_DIR="$WORK/loupe-datadir"; R_DIR="$WORK/reth-datadir"
rm -rf "$L_DIR" "$R_DIR"
read -r _ li lirss _ < <(measure init "$BIN" init --datadir "$L_DIR" --genesis "$GEN/genesis.json" --proof-history "${LOUPE_PROOF_HISTORY:-all}")
rt_loupe=$(pingpong)
read -r _ lt lrss lcpu < <(measure import "$BIN" import --datadir "$L_DIR" "$GEN/chain.rlp")
gas=$(grep -o '[0-9.]* Mgas)' "$WORK/import.out" | tr -dc '0-9.')
read -r _ ri rirss _ < <(measure rinit "$RETH" init --chain "$GEN/genesis.json" --datadir "$R_DIR")
rt_reth=$(pingpong)
read -r _ rt rrss rcpu < <(measure rimport "$RETH" import --chain "$GEN/genesis.json" --datadir "$R_DIR" "$GEN/chain.rlp")
for v in "$li" "$lt" "$ri" "$rt"; do [ -n "$v" ] || { echo "a measurement failed (see above)" >&2; exit 1; }; done
lsize=$(du -sm "$L_DIR" | awk '{print $1}'); rsize=$(du -sm "$R_DIR" | awk '{print $1}')
echo "chain: $ACCOUNTS accounts, $BLOCKS blocks, $gas Mgas (seed $SEED)"
echo "cores' round trip: $rt_loupe ns before loupe's import, $rt_reth ns before reth's, $(pingpong) ns after"
echo "| node | init s | import s | import Mgas/s | blocks/s | import CPU s | CPU ms/block | import peak RSS MiB | datadir MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for row in "loupe $li $lt $lcpu $lrss $lsize" "reth $ri $rt $rcpu $rrss $rsize"; do
  read -r n i t cpu rss size <<< "$row"
  awk -v n="$n" -v i="$i" -v t="$t" -v c="$cpu" -v g="$gas" -v b="$BLOCKS" -v r="$rss" -v s="$size" \
    'BEGIN{printf "| %s | %s | %s | %.1f | %.1f | %s | %.1f | %d | %s |\n", n, i, t, g/t, b/t, c, 1000*c/b, r/1024, s}'
done
