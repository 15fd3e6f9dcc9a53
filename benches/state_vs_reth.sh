#!/usr/bin/env bash
# Import of one generated chain by loupe and by reth 2.5.1, back to back, several runs: each node
# initialises its datadir from the genesis once, then every run imports the whole chain into a
# fresh copy of that datadir. Prints wall, user and system seconds and peak RSS per run, and the
# datadir sizes after the last run. Made for `loupe generate` chains whose genesis is large (the
# 10M-account state), where an init per run would take minutes.
# Usage: RETH=<reth 2.5.1 binary> benches/state_vs_reth.sh GEN_DIR [RUNS] [WORK_DIR]
# LOUPE_BIN=path uses that binary instead of target/release/loupe. reth: ../shared/peers (README
# there). Without RETH only loupe runs. LOUPE_PROOF_HISTORY=window initialises loupe's datadir
# without trie history below the unwind window (default: all), where `loupe import` checks the
# state root once per commit group.
set -euo pipefail
GEN=${1:?usage: benches/state_vs_reth.sh GEN_DIR [RUNS] [WORK_DIR]}
RUNS=${2:-2}
WORK=${3:-$(mktemp -d)}
BIN=${LOUPE_BIN:-$PWD/target/release/loupe}
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }
mkdir -p "$WORK"
timed() { # label, command...: one line "label: wall user sys peak-MiB"
  local label=$1; shift
  if ! /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$@" >"$WORK/out.log" 2>&1; then
    echo "$label failed: $* (output: $WORK/out.log)" >&2; tail -5 "$WORK/out.log" >&2; exit 1
  fi
  read -r wall user sys rss <"$WORK/time"
  echo "$label: ${wall} s wall (${user} user, ${sys} sys), peak RSS $((rss / 1024)) MiB"
}
[ -d "$WORK/loupe-init" ] || timed "loupe init" "$BIN" init --datadir "$WORK/loupe-init" --genesis "$GEN/genesis.json" --proof-history "${LOUPE_PROOF_HISTORY:-all}"
if [ -n "${RETH:-}" ] && [ ! -d "$WORK/reth-init" ]; then
  timed "reth init" "$RETH" init --chain "$GEN/genesis.json" --datadir "$WORK/reth-init"
fi
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/loupe-run" && cp -r "$WORK/loupe-init" "$WORK/loupe-run" && sync
  timed "loupe import, run $run" "$BIN" import --datadir "$WORK/loupe-run" "$GEN/chain.rlp"
  if [ -n "${RETH:-}" ]; then
    rm -rf "$WORK/reth-run" && cp -r "$WORK/reth-init" "$WORK/reth-run" && sync
    timed "reth import, run $run" "$RETH" import --chain "$GEN/genesis.json" --datadir "$WORK/reth-run" "$GEN/chain.rlp"
    # reth's own account of its stages, to tell one-off work from per-block work.
    sed 's/\x1b\[[0-9;]*m//g' "$WORK/out.log" | awk '/Finished stage/ {
      split($1, t, "T"); split(t[2], c, ":"); s = c[1] * 3600 + c[2] * 60 + c[3]
      for (i = 1; i <= NF; i++) if ($i ~ /^stage=/) name = substr($i, 7)
      if (prev) printf "  %s %.1f s\n", name, s - prev; prev = s }'
  fi
done
echo "datadir: loupe $(du -sm "$WORK/loupe-run" | cut -f1) MiB${RETH:+, reth $(du -sm "$WORK/reth-run" | cut -f1) MiB}"
