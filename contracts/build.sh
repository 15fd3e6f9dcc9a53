#!/usr/bin/env bash
# Rebuilds the dev-chain sample contracts: solc 0.8.28 from npm (solcjs), optimizer on, EVM
# version cancun. Prints the runtime/creation bytecode to paste into src/dev/contracts.rs.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm install --silent --no-audit --no-fund solc@0.8.28 >/dev/null)
cat > "$work/input.json" <<JSON
{"language":"Solidity","sources":{"Sample.sol":{"content":$(python3 -c 'import json,sys; print(json.dumps(open("Sample.sol").read()))')}},
 "settings":{"optimizer":{"enabled":true,"runs":200},"evmVersion":"cancun",
  "outputSelection":{"*":{"*":["evm.bytecode.object"]}}}}
JSON
node -e '
const solc = require(process.argv[1] + "/node_modules/solc");
const out = JSON.parse(solc.compile(require("fs").readFileSync(process.argv[1] + "/input.json", "utf8")));
if (out.errors) for (const e of out.errors) if (e.severity === "error") { console.error(e.formattedMessage); process.exit(1); }
for (const [name, c] of Object.entries(out.contracts["Sample.sol"])) console.log(name + " 0x" + c.evm.bytecode.object);
' "$work"
