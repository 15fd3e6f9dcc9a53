#!/usr/bin/env bash
# Import cost along a chain: wall ms per block for each commit group of 128 blocks (the
# default `--import.batch`), read from the import's own debug log, plus the whole import's time, peak RSS and the
# datadir's size. A block's cost should not grow with the chain's length.
# Usage: benches/import_along.sh GEN_DIR [WORK_DIR]   (GEN_DIR from `loupe generate`)
# LOUPE_BIN=path uses that binary instead of target/release/loupe.
set -euo pipefail
GEN=$1
WORK=${2:-$(mktemp -d)}
BIN=${LOUPE_BIN:-$PWD/target/release/loupe}
DIR="$WORK/datadir"
rm -rf "$DIR"
mkdir -p "$WORK"
"$BIN" init --datadir "$DIR" --genesis "$GEN/genesis.json" >/dev/null 2>&1
sync
RUST_LOG=import=debug /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" \
  "$BIN" import --datadir "$DIR" "$GEN/chain.rlp" >"$WORK/import.log" 2>&1
read -r wall user sys rss <"$WORK/time"
echo "import: ${wall} s wall (${user} user, ${sys} sys), peak RSS $((rss / 1024)) MiB, datadir $(du -sm "$DIR" | cut -f1) MiB"
python3 - "$WORK/import.log" <<'PY'
import re, sys
from datetime import datetime
ansi = re.compile(r"\x1b\[[0-9;]*m")
stored = {}
for line in open(sys.argv[1], errors="replace"):
    line = ansi.sub("", line)
    m = re.match(r"(\S+) +DEBUG import: block stored number=(\d+)", line)
    if m:
        stored[int(m.group(2))] = datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
if not stored:
    sys.exit("no 'block stored' lines in the log")
first, last = min(stored), max(stored)
# The first group's commit has no earlier mark: ranges start after block 128.
edges = [b for b in range(128, last + 1, 128)] + ([last] if last % 128 else [])
print("blocks        ms per block")
for a, b in zip(edges, edges[1:]):
    ms = (stored[b] - stored[a]).total_seconds() * 1000 / (b - a)
    print(f"{a + 1:>5}-{b:<6} {ms:8.1f}")
PY
