#!/usr/bin/env bash
# Import cost along a chain, read from the import's own debug log: for each window of WINDOW
# blocks (default 128, the default `--import.batch`), the wall ms per block and where they went
# (the writer's state, root and block-row phases, and its share of the group commits), plus
# the whole import's time, peak RSS, bytes written and the datadir's size, and what an epoch's
# close costs (LOUPE_HISTORY_EPOCH: the datadir's epoch length, if not the default 128).
# Usage: benches/import_along.sh GEN_DIR [WORK_DIR] [WINDOW]   (GEN_DIR from `loupe generate`)
# LOUPE_BIN=path uses that binary instead of target/release/loupe; LOUPE_ARGS adds flags to
# `loupe import` (e.g. LOUPE_ARGS="--db.cache-mb 2048").
set -euo pipefail
GEN=$1
WORK=${2:-$(mktemp -d)}
WINDOW=${3:-128}
BIN=${LOUPE_BIN:-$PWD/target/release/loupe}
DIR="$WORK/datadir"
rm -rf "$DIR"
mkdir -p "$WORK"
"$BIN" init --datadir "$DIR" --genesis "$GEN/genesis.json" >/dev/null 2>&1
sync
# shellcheck disable=SC2086 # LOUPE_ARGS is a list of flags
RUST_LOG=import=debug /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" \
  "$BIN" import ${LOUPE_ARGS:-} --datadir "$DIR" "$GEN/chain.rlp" >"$WORK/import.log" 2>&1 &
pid=$!
# The import's own write(2) bytes, read from /proc just before it exits.
wchar=0
while kill -0 "$pid" 2>/dev/null; do
  child=$(pgrep -P "$pid" | head -1 || true)
  [ -n "$child" ] && w=$(awk '/^wchar/ {print $2}' "/proc/$child/io" 2>/dev/null) && wchar=${w:-$wchar}
  sleep 1
done
wait "$pid"
read -r wall user sys rss <"$WORK/time"
echo "import: ${wall} s wall (${user} user, ${sys} sys), peak RSS $((rss / 1024)) MiB, written $((wchar >> 20)) MiB, datadir $(du -sm "$DIR" | cut -f1) MiB"
python3 - "$WORK/import.log" "$WINDOW" "${LOUPE_HISTORY_EPOCH:-128}" <<'PY'
import re, sys
from datetime import datetime
ansi = re.compile(r"\x1b\[[0-9;]*m")
window = int(sys.argv[2])
executed, stored, commit = {}, {}, {}
for line in open(sys.argv[1], errors="replace"):
    line = ansi.sub("", line)
    m = re.match(r"\S+ +DEBUG import: block executed number=(\d+) .*state_us=(\d+) root_us=(\d+) block_us=(\d+)", line)
    if m:
        executed[int(m.group(1))] = [int(x) / 1000 for x in m.group(2, 3, 4)]
        continue
    m = re.match(r"(\S+) +DEBUG import: block stored number=(\d+) .*?(?:group=(\d+) )?commit_us=(\d+)", line)
    if m:
        n = int(m.group(2))
        stored[n] = datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
        commit[n] = int(m.group(4)) / 1000 / int(m.group(3) or 1)
if not stored:
    sys.exit("no 'block stored' lines in the log")
last = max(stored)
print("ms per block: wall, then the writer's phases (state, root, block rows, commit share)")
print(f"{'blocks':>13} {'wall':>7} {'state':>7} {'root':>7} {'block':>7} {'commit':>7}")
# Wall time is measured between the last commits before and inside a window (a group's blocks
# share their commit's time), so a window shorter than a group, or the first one, shows "-".
# (lines of one group are logged microseconds apart, groups at least a block's work apart).
ms = lambda a, b: (stored[b] - stored[a]).total_seconds() * 1000
marks = [n for n in sorted(stored) if n == last or n + 1 in stored and ms(n, n + 1) > 1]
for a in range(1, last + 1, window):
    b = min(a + window - 1, last)
    prev = max((x for x in marks if x < a), default=None)
    end = max((x for x in marks if x <= b), default=None)
    wall = ms(prev, end) / (end - prev) if prev and end and end > prev else float("nan")
    ns = [n for n in range(a, b + 1) if n in executed]
    if not ns:
        continue
    phase = [sum(executed[n][i] for n in ns) / len(ns) for i in range(3)]
    c = sum(commit.get(n, 0) for n in ns) / len(ns)
    wall = "-" if wall != wall else f"{wall:.1f}"
    print(f"{a:>6}-{b:<6} {wall:>7} {phase[0]:7.1f} {phase[1]:7.1f} {phase[2]:7.1f} {c:7.1f}")
# An epoch's close (indexing and packing its history) runs in the block rows of the epoch's
# first block: the median of those against the other blocks', over the second half.
import statistics
epoch = int(sys.argv[3])
late = [n for n in executed if n > last // 2]
first = [executed[n][2] for n in late if n % epoch == 0]
other = [executed[n][2] for n in late if n % epoch != 0]
if first and other:
    print(f"epoch close (block rows of each epoch's first block, blocks {last // 2 + 1}+): "
          f"median {statistics.median(first):.0f} ms over {len(first)} epochs; "
          f"other blocks {statistics.median(other):.1f} ms")
PY
