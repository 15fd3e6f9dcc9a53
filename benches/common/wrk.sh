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
