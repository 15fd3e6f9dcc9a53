#!/usr/bin/env bash
# Mainnet's first blocks from era1 files, loupe's `import` against reth 2.5.1's `import-era`
# and the pipeline run that executes what it stored, back to back, on the same files.
# Usage: RETH=/path/to/reth LOUPE_BIN=/path/to/loupe benches/era1_vs_reth.sh [ERA1_DIR] [RUNS]
# ERA1_DIR defaults to ../shared/fixtures/mainnet-era1 (blocks 0-16,383). reth reads era1 files
# from a local folder only with a checksums.txt beside them (one 0x-prefixed sha256 per file, in
# epoch order, as the published hosts serve it): the script writes one in a folder of links.
# reth's `import-era` stores headers and bodies only; `reth node --debug.tip <last hash>
# --debug.max-block <last> --debug.terminate` then runs its pipeline (senders, execution,
# hashing, merkle, indices) to the last block and exits. Prints, per run, wall seconds, CPU
# seconds (user + system, all threads) and peak RSS, then the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
RETH="${RETH:?set RETH to the reth 2.5.1 binary}"
ERA="$(realpath "${1:-${LOUPE_FIXTURES:-../shared/fixtures}/mainnet-era1}")"
RUNS="${2:-3}"
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-$PWD/${CARGO_TARGET_DIR:-target}/release/loupe}"
WORK="${BENCH_WORK:-$(mktemp -d)}"
LINKS="$WORK/era1"; rm -rf "$LINKS"; mkdir -p "$LINKS"
for f in "$ERA"/*.era1; do ln -s "$f" "$LINKS/"; done
(cd "$LINKS" && for f in *.era1; do echo "0x$(sha256sum "$f" | cut -d' ' -f1)"; done) > "$LINKS/checksums.txt"
measure() { # name, command...: prints "seconds cpu-seconds peak-KiB"
  local name=$1; shift
  if ! /usr/bin/time -f "%e %U %S %M" -o "$WORK/t" "$@" >"$WORK/$name.out" 2>&1; then
    echo "$name failed: $* (output: $WORK/$name.out)" >&2; tail -3 "$WORK/$name.out" >&2; exit 1
  fi
  awk '{printf "%s %.2f %d\n", $1, $2 + $3, $4}' "$WORK/t"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
: > "$WORK/loupe.txt"; : > "$WORK/reth.txt"
for run in $(seq 1 "$RUNS"); do
  L="$WORK/loupe-datadir"; R="$WORK/reth-datadir"; rm -rf "$L" "$R"
  "$BIN" init --chain mainnet --datadir "$L" >/dev/null 2>&1
  read -r lt lc lm < <(measure loupe "$BIN" import --datadir "$L" "$LINKS")
  head=$(grep -o 'head #[0-9]*' "$WORK/loupe.out" | head -1 | tr -dc '0-9')
  # reth's pipeline runs to a tip given by hash: mainnet block 16,383's, or TIP for other files.
  if [ -z "${TIP:-}" ]; then
    [ "$head" = 16383 ] || { echo "set TIP to the hash of block $head" >&2; exit 1; }
    TIP=0x05c64fc4842734317f8f1dfe29a7e16f676575ad82a7dae37cef1379cf8500b5
  fi
  read -r ri ric rim < <(measure reth-import "$RETH" import-era --chain mainnet --datadir "$R" --path "$LINKS")
  read -r rp rpc rpm < <(measure reth-pipeline "$RETH" node --chain mainnet --datadir "$R" --debug.tip "$TIP" \
    --debug.max-block "$head" --debug.terminate --disable-discovery --no-persist-peers --port 0 \
    --authrpc.port 0 --ipcdisable --max-outbound-peers 0 --max-inbound-peers 0)
  lsize=$(du -sm "$L" | awk '{print $1}'); rsize=$(du -sm "$R" | awk '{print $1}')
  echo "$lt $lc $lm $lsize" >> "$WORK/loupe.txt"
  awk -v a="$ri" -v b="$rp" -v c="$ric" -v d="$rpc" -v m="$rim" -v n="$rpm" -v s="$rsize" \
    'BEGIN{printf "%.2f %.2f %d %s %s %s\n", a + b, c + d, (m > n ? m : n), s, a, b}' >> "$WORK/reth.txt"
  echo "run $run: loupe $lt s (CPU $lc s), reth $ri + $rp s (CPU $ric + $rpc s)"
done
echo "blocks 0-$head, $RUNS runs, medians:"
echo "| node | wall s | CPU s (user + sys) | peak RSS MiB | datadir MiB |"
echo "|---|---|---|---|---|"
for n in loupe reth; do
  f="$WORK/$n.txt"
  printf "| %s | %s | %s | %d | %s |\n" "$n" "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f2 "$f" | median)" \
    "$(( $(cut -d' ' -f3 "$f" | median | cut -d. -f1) / 1024 ))" "$(cut -d' ' -f4 "$f" | median)"
done
lw=$(cut -d' ' -f1 "$WORK/loupe.txt" | median); rw=$(cut -d' ' -f1 "$WORK/reth.txt" | median)
awk -v l="$lw" -v r="$rw" 'BEGIN{printf "loupe at %.2fx reth'"'"'s speed (wall, medians)\n", r / l}'
