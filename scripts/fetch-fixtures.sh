#!/usr/bin/env bash
# Fetches the fixtures the tests read from their public sources, each at a pinned commit, and
# checks every file against its sha256 in scripts/fixtures.sha256 before it is put in place.
#
#   scripts/fetch-fixtures.sh [SET...]        fetch (default: execution-apis mainnet-era1 mainnet-witness)
#   scripts/fetch-fixtures.sh --check [SET...] only check the files already in place
#
# SET: execution-apis ($LOUPE_FIXTURES), mainnet-era1 ($LOUPE_ERA1_FIXTURES), mainnet-witness
# ($LOUPE_WITNESS_FIXTURES), ethereum-tests ($LOUPE_ETHEREUM_TESTS), eest ($LOUPE_EEST).
# Files go to $LOUPE_FIXTURES_DIR/SET, by default ../shared/fixtures/SET beside the repository,
# where the tests look when the variable of the set is not set. A set is written to a scratch
# folder, checked, and only then moved into place; a failed check leaves nothing behind.
# Needs curl, tar, gzip and sha256sum.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
sums="$repo/scripts/fixtures.sha256"
dest_root=${LOUPE_FIXTURES_DIR:-$repo/../shared/fixtures}

# The sources, pinned. Each was checked to hold these files byte for byte (their git blobs).
# ethereum/execution-apis: the conformance chain and the .io exchanges of tests/ (CC0 1.0).
EXECUTION_APIS=033ca6e69da000445840d2060ff47e5e56172a86
# ethereum/trin test_assets/era1: mainnet's first two era1 files (MIT / Apache-2.0); the first
# is also status-im/nimbus-eth1's tests/replay copy.
TRIN=019d645814eca1e49b10a0e9a49a01162f4afd26
# status-im/portal-mainnet config/: EIP-7643's historical hashes accumulator (MIT).
PORTAL_MAINNET=aed1792435e2fe2b3220791dcbae1fb7018c6ed6
# risc0/zeth bin/ethereum/data/ethereum: host caches of mainnet blocks (Apache-2.0); the parent
# of the commit that moved them to Git LFS.
ZETH=0a404252d32bc1f36777c7c42defb4d85049dc7a
# status-im/nimbus-eth1 tests/fixtures/PersistBlockTests (Apache-2.0 / MIT), the last commit
# before their removal.
NIMBUS=a57958f71eee25dcca3e30c5b4fd9d37d0f4822d
# erigontech/rpc-tests, branch lupin012/debug_executionWitness: geth's debug_executionWitness
# answers (test_01: block 15,537,394, test_05: 19,426,587).
RPC_TESTS=62fee84dc0d644231322b6308bad171e468bab6b
# ethereum/portal-spec-tests tests/mainnet/history/block_data (CC0).
PORTAL_SPEC=7c789a57102616e115d8ed28a7d6457470fa92b3
# ethereum/go-ethereum cmd/keeper: Hoodi block 1,151,683 and its ExtWitness (LGPL-3.0).
GETH=d9f3b1cea6fb5d975d2f4edaf034960414ac2174

raw() { # owner/repo commit path -> stdout
  curl -fsSL --retry 3 "https://raw.githubusercontent.com/$1/$2/$3"
}

get() { # owner/repo commit path dest-file
  mkdir -p "$(dirname "$4")"
  raw "$1" "$2" "$3" >"$4"
}

fetch_execution_apis() { # scratch
  curl -fsSL --retry 3 "https://codeload.github.com/ethereum/execution-apis/tar.gz/$EXECUTION_APIS" \
    | tar -xz -C "$1" --strip-components=2 "execution-apis-$EXECUTION_APIS/tests"
}

fetch_mainnet_era1() { # scratch
  for f in mainnet-00000-5ec1ffb8.era1 mainnet-00001-a5364e9a.era1; do
    get ethereum/trin "$TRIN" "test_assets/era1/$f" "$1/$f"
  done
  get status-im/portal-mainnet "$PORTAL_MAINNET" config/historical_hashes_accumulator.ssz \
    "$1/mainnet-historical-hashes-accumulator.ssz"
}

fetch_mainnet_witness() { # scratch
  for n in 1150000 1920000 4370000 15537394 19426587; do
    get risc0/zeth "$ZETH" "bin/ethereum/data/ethereum/1-$n.json.gz" "$1/zeth/$n.json.gz"
  done
  for n in 97 46147 47216 48915 50111 81383 85858 146675 226147 231501 248032 420301 652148 \
    1017395 1155095 1352922 1417555 1920000 2463413 2675002; do
    get status-im/nimbus-eth1 "$NIMBUS" "tests/fixtures/PersistBlockTests/block$n.json" \
      "$1/nimbus-persist/block$n.json"
  done
  get erigontech/rpc-tests "$RPC_TESTS" integration/mainnet/debug_executionWitness/test_01.json \
    "$1/geth-witness/debug_executionWitness-15537394.json"
  get erigontech/rpc-tests "$RPC_TESTS" integration/mainnet/debug_executionWitness/test_05.json \
    "$1/geth-witness/debug_executionWitness-19426587.json"
  for n in 15537394 19426587; do
    get ethereum/portal-spec-tests "$PORTAL_SPEC" \
      "tests/mainnet/history/block_data/block-data-$n.yaml" "$1/portal/block-data-$n.yaml"
  done
  for f in 1192c3_block.rlp 1192c3_witness.rlp; do
    get ethereum/go-ethereum "$GETH" "cmd/keeper/$f" "$1/hoodi/$f"
  done
}

# The consensus suites are archives packed here from their sources, not files published as
# they are: the script checks them, it cannot download them.
packed() { # set
  case "$1" in
    ethereum-tests)
      echo "ethereum-tests: three .tar.zst archives packed from ethereum/tests at commit" \
        "4c87ebbf024a3e9ec842bcce90564f629a3bcd82 (BlockchainTests' ValidBlocks, InvalidBlocks," \
        "TransitionTests; GeneralStateTests' Cancun and Prague tests; DifficultyTests), which no" \
        "server publishes packed; put them in $dest_root/ethereum-tests (or set" \
        "LOUPE_ETHEREUM_TESTS), then run: scripts/fetch-fixtures.sh --check ethereum-tests" ;;
    eest)
      echo "eest: an archive of the blockchain tests filled by ethereum/execution-specs at commit" \
        "524b44617e410ab21b5122f0be5113b62a0e76ee with its own filler (\`fill\`, the commands in" \
        "the archive's PROVENANCE.md), which no server publishes; put it in $dest_root/eest (or" \
        "set LOUPE_EEST), then run: scripts/fetch-fixtures.sh --check eest" ;;
  esac
}

check() { # set dir: every file of the set in dir against its sum
  local set=$1 dir=$2 list
  list=$(grep -E "^[0-9a-f]{64}  $set/" "$sums" | sed "s#  $set/#  #")
  [ -n "$list" ] || { echo "no sums for $set in $sums" >&2; return 1; }
  (cd "$dir" && sha256sum --check --quiet --strict <<<"$list")
}

check_only=false
if [ "${1:-}" = "--check" ]; then check_only=true; shift; fi
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(execution-apis mainnet-era1 mainnet-witness)

for set in "${sets[@]}"; do
  case "$set" in
    execution-apis | mainnet-era1 | mainnet-witness | ethereum-tests | eest) ;;
    *) echo "unknown fixture set $set" >&2; exit 2 ;;
  esac
  dest="$dest_root/$set"
  if $check_only; then
    check "$set" "$dest" && echo "$set: every file in $dest matches its sha256"
    continue
  fi
  if [ "$set" = ethereum-tests ] || [ "$set" = eest ]; then
    packed "$set" >&2
    exit 3
  fi
  if [ -e "$dest" ]; then
    if check "$set" "$dest" 2>/dev/null; then
      echo "$set: already in $dest, every file matching its sha256"
      continue
    fi
    echo "$dest exists and does not match scripts/fixtures.sha256: move it away first" >&2
    exit 1
  fi
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  echo "$set: fetching into $dest"
  mkdir -p "$scratch/all"
  "fetch_${set//-/_}" "$scratch/all"
  # Only the files the tests read, each checked.
  mkdir -p "$scratch/$set"
  grep -E "^[0-9a-f]{64}  $set/" "$sums" | sed "s#^[0-9a-f]*  $set/##" | while IFS= read -r f; do
    mkdir -p "$(dirname "$scratch/$set/$f")"
    mv "$scratch/all/$f" "$scratch/$set/$f"
  done
  check "$set" "$scratch/$set"
  mkdir -p "$dest_root"
  mv "$scratch/$set" "$dest"
  rm -rf "$scratch"
  trap - EXIT
  echo "$set: $(find "$dest" -type f | wc -l) files in place, every one matching its sha256"
done
