#!/usr/bin/env bash
# debug_executionWitness (issue 61): for old and new blocks of a generated chain, loupe's time,
# server CPU and witness size against reth 2.5.1's, the same requests back to back, one at a
# time. reth re-executes each block over its parent's historical state; loupe executes it once
# through a read recorder, proves the reads from its trie history, and runs the result
# statelessly before answering.
# Usage: RETH=/path/to/reth benches/witness.sh ACCOUNTS BLOCKS [GAS_LIMIT] [REPS]
# (reth: ../shared/peers, README there; NO_RETH=1 measures loupe alone.) Prints, per block, the
# median wall time of REPS calls from curl, each server's CPU per call from /proc, and the
# witness's nodes, codes and bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
ACCOUNTS="${1:?accounts}"; BLOCKS="${2:?blocks}"; GAS="${3:-30000000}"; REPS="${4:-7}"
if [ -z "${LOUPE_BIN:-}" ]; then cargo build --release --locked --quiet; fi
BIN="${LOUPE_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/loupe}"
WORK="${BENCH_WORK:-$(mktemp -d)}"
PEERS="${PEERS:-$PWD/../shared/peers}"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
# shellcheck source=common/reth.sh
. benches/common/reth.sh
GEN="$WORK/gen-$ACCOUNTS-$BLOCKS-$GAS"
# The generator's work datadir is a complete loupe datadir of the chain (every root verified).
[ -f "$GEN/chain.rlp" ] || "$BIN" generate --out "$GEN" --accounts "$ACCOUNTS" --blocks "$BLOCKS" \
  --gas-limit "$GAS" --keep-datadir >/dev/null 2>&1
L_PORT=18761; R_PORT=18762
"$BIN" node --datadir "$GEN/.work" --http.port "$L_PORT" --log.filter warn --rpc.evm-timeout 60 \
  --rpc.client-share 100 >/dev/null 2>&1 &
PIDS+=($!); L_PID=$!
wait_up "$L_PORT"
R_PID=""
if [ -z "${NO_RETH:-}" ]; then
  reth_unpack
  [ -n "$RETH" ] || { echo "no reth: set RETH or NO_RETH=1" >&2; exit 1; }
  if [ ! -d "$WORK/reth-witness-data" ]; then
    "$RETH" init --chain "$GEN/genesis.json" --datadir "$WORK/reth-witness-data" >/dev/null 2>&1
    "$RETH" import --chain "$GEN/genesis.json" --datadir "$WORK/reth-witness-data" "$GEN/chain.rlp" >/dev/null 2>&1
  fi
  "$RETH" node --chain "$GEN/genesis.json" --datadir "$WORK/reth-witness-data" --http \
    --http.addr 127.0.0.1 --http.port "$R_PORT" --http.api eth,debug --disable-discovery \
    --no-persist-peers --port 0 --authrpc.port 0 --ipcdisable --log.stdout.filter error >/dev/null 2>&1 &
  PIDS+=($!); R_PID=$!
  wait_up "$R_PORT"
fi
echo "chain: $ACCOUNTS accounts, $BLOCKS blocks, gas limit $GAS; $REPS calls a block; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
python3 - "$BLOCKS" "$REPS" "$L_PORT" "$L_PID" "$R_PORT" "${R_PID:-0}" <<'PY'
import json, os, statistics, sys, time, urllib.request
blocks, reps, lport, lpid, rport, rpid = map(int, sys.argv[1:])
tick = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / tick
def call(port, n):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "debug_executionWitness", "params": [hex(n)]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", body, {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    return time.perf_counter() - t, raw
def measure(port, pid, n):
    times, c0 = [], cpu(pid)
    for _ in range(reps):
        t, raw = call(port, n)
        times.append(t)
    c1 = cpu(pid)
    answer = json.loads(raw)
    if "result" not in answer:
        return None, answer.get("error")
    w = answer["result"]
    return (statistics.median(times) * 1000, (c1 - c0) / reps * 1000, len(w["state"]), len(w["codes"]), len(raw)), None
picked = sorted({1, 10, blocks // 4, blocks // 2, 3 * blocks // 4, blocks - 10, blocks})
print("| block | age (blocks) | loupe ms | loupe CPU ms | reth ms | reth CPU ms | reth/loupe time | loupe nodes | reth nodes | loupe codes | reth codes | loupe KiB | reth KiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in picked:
    l, le = measure(lport, lpid, n)
    r, re_ = measure(rport, rpid, n) if rpid else (None, "not run")
    if l is None:
        print(f"| {n} | loupe error: {le} |"); continue
    if r is None:
        r = ("—", "—", "—", "—", 0)
        ratio = str(re_)
    else:
        ratio = f"{r[0] / l[0]:.1f}×"
    fmt = lambda v: f"{v:.1f}" if isinstance(v, float) else str(v)
    row = [n, blocks - n, fmt(l[0]), fmt(l[1]), fmt(r[0]), fmt(r[1]), ratio, l[2], r[2], l[3], r[3], f"{l[4] / 1024:.0f}", f"{r[4] / 1024:.0f}"]
    print("| " + " | ".join(map(str, row)) + " |")
PY
