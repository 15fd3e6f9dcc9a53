#!/usr/bin/env bash
# eth_getProof with a cold page cache (issue 41): restarts the node on DATADIR N times; each
# time (with WARM=1) warms the process with a proof of another account at the same block, drops
# the host's page cache (root: `echo 3 > /proc/sys/vm/drop_caches`), then times one proof of
# ACCOUNT with slots 0 and 1 at BLOCK. Prints the median, min and max.
# Usage: [WARM=1] benches/cold_proof.sh LOUPE_BIN DATADIR ACCOUNT BLOCK [N]
set -euo pipefail
BIN=$1 D=$2 A=$3 B=$4 N=${5:-7}
PORT="${PORT:-18702}"
URL="http://127.0.0.1:$PORT/"
proof() { printf '{"jsonrpc":"2.0","id":1,"method":"eth_getProof","params":["%s",%s,"%s"]}' "$1" "$2" "$B"; }
OUT=$(mktemp)
ts=()
for _ in $(seq "$N"); do
  "$BIN" node --datadir "$D" --http.port "$PORT" --log.filter warn --rpc.client-share 100 --rpc.max-connections-per-ip 1024 &
  P=$!
  for _ in $(seq 100); do curl -s "$URL" -o /dev/null && break; sleep 0.05; done
  if [ -n "${WARM:-}" ]; then
    curl -s -o /dev/null -H 'Content-Type: application/json' \
      -d "$(proof 0x00000000000000000000000000000000000000aa '[]')" "$URL"
  fi
  sync
  echo 3 > /proc/sys/vm/drop_caches
  t=$(curl -s -o "$OUT" -w '%{time_total}' -H 'Content-Type: application/json' \
    -d "$(proof "$A" '["0x0","0x1"]')" "$URL")
  grep -q '"result"' "$OUT" || { echo "no result: $(head -c 300 "$OUT")" >&2; kill "$P"; exit 1; }
  ts+=("$t")
  kill "$P"
  wait "$P" 2>/dev/null || true
done
rm -f "$OUT"
printf '%s\n' "${ts[@]}" | sort -n | awk -v b="$B" '{a[NR] = $1 * 1000}
  END {printf "block %s: cold proof median %.2f ms (min %.2f, max %.2f, n=%d)\n", b, a[int((NR + 1) / 2)], a[1], a[NR], NR}'
