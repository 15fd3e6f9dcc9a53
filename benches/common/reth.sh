# reth 2.5.1 beside loupe, for the side-by-side scripts (sourced; needs $WORK, $PEERS, $FX and
# the array PIDS, whose processes the script's trap kills).

# `wait_up PORT`: waits until something answers HTTP on PORT (30 s at most, else exits).
wait_up() { for _ in $(seq 300); do curl -s "http://127.0.0.1:$1/" -o /dev/null && return 0; sleep 0.1; done; echo "port $1 never answered" >&2; exit 1; }

# Sets RETH to $RETH if given, else to reth unpacked from $PEERS (zstd from Debian), else empty.
reth_unpack() {
  RETH="${RETH:-}"
  if [ -z "$RETH" ] && [ -f "$PEERS/reth-2.5.1-x86_64-linux-gnu.zst" ]; then
    command -v zstd >/dev/null || { apt-get update -qq && apt-get install -y -qq zstd; }
    zstd -q -d "$PEERS/reth-2.5.1-x86_64-linux-gnu.zst" -o "$WORK/reth" && chmod +x "$WORK/reth"
    RETH="$WORK/reth"
  fi
}

# `reth_fixture_node PORT`: imports the fixture chain ($FX) into a reth datadir under $WORK and
# serves it on PORT (eth, net, web3, trace, debug); sets RETH_PID once it answers.
reth_fixture_node() {
  "$RETH" init --chain "$FX/genesis.json" --datadir "$WORK/reth-data" >/dev/null 2>&1
  "$RETH" import --chain "$FX/genesis.json" --datadir "$WORK/reth-data" "$FX/chain.rlp" >/dev/null 2>&1
  "$RETH" node --chain "$FX/genesis.json" --datadir "$WORK/reth-data" --http --http.addr 127.0.0.1 \
    --http.port "$1" --http.api eth,net,web3,trace,debug --disable-discovery --no-persist-peers \
    --port 0 --authrpc.port 0 --ipcdisable --log.stdout.filter error >/dev/null 2>&1 &
  PIDS+=($!); RETH_PID=$!
  wait_up "$1"
}
