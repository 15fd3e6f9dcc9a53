# Shared by the HTTP load scripts (sourced; needs $WORK, $URL, $DUR).

# Writes a wrk Lua script that POSTs a random body from $1 (one JSON body per line); prints
# its path.
lua() {
  cat > "$WORK/s.lua" <<LUA
local bodies = {}
for line in io.lines("$1") do bodies[#bodies + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function() return wrk.format(nil, "/", nil, bodies[math.random(#bodies)]) end
LUA
  echo "$WORK/s.lua"
}

# Writes to $3 one eth_getTransactionByBlockNumberAndIndex body per transaction of the blocks
# listed in $2 (decimal, space-separated), asking the node at URL $1 for each block's count.
lookup_bodies() {
  : > "$3"
  local b n i
  for b in $2; do
    n=$(curl -s -H 'Content-Type: application/json' -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockTransactionCountByNumber\",\"params\":[\"$(printf '0x%x' "$b")\"]}" "$1" | sed -E 's/.*"result":"0x([0-9a-f]+)".*/\1/')
    for i in $(seq 0 $(( 16#$n - 1 ))); do
      printf '{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionByBlockNumberAndIndex","params":["0x%x","0x%x"]}\n' "$b" "$i" >> "$3"
    done
  done
}

