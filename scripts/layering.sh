#!/usr/bin/env bash
# The layering rule between rooms (the modules under src/), as src/lib.rs's table states it;
# `.ci/run` runs it. Fails naming each upward import and each room without a row.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every room (a module under src/) and the rooms it may use: src/lib.rs's table states the same
# rule, row for row. A `crate::<room>` in a room's files naming any other room is an upward
# import; a room with no row here or in src/lib.rs fails too, so a new room cannot be forgotten.
layers='
chain:
storage:
evm: chain
trie: storage
import: trie evm storage chain
witness: trie evm storage chain
rpc: witness trie evm storage chain
explorer: rpc storage chain
follow: import trie evm storage chain
dev: import trie evm storage chain
cli: *
'
fail=0
rooms=$(find src -mindepth 1 -maxdepth 1 \( -type d -o -name '*.rs' \) ! -name lib.rs ! -name main.rs \
  -printf '%f\n' | sed 's/\.rs$//' | sort -u)
for room in $rooms; do
  if ! printf '%s\n' "$layers" | grep -q "^$room:"; then
    echo "layering: src/$room has no row in .ci/run's layers: say which rooms it may use"
    fail=1
    continue
  fi
  may=$(printf '%s\n' "$layers" | sed -n "s/^$room:[[:space:]]*//p")
  table=$(grep -E "^//! \| \`$room\` *\|" src/lib.rs | awk -F'|' '{print $4}' || true)
  if [ -z "$table" ]; then
    echo "layering: src/$room has no row in src/lib.rs's table"
    fail=1
  else
    # The table's "may use" column names the same rooms (`everything`, `nothing internal`).
    named=$(printf '%s\n' "$table" | { grep -oE '`[a-z_]+`' || true; } | tr -d '`' | sort | paste -sd' ')
    want=$(printf '%s\n' $may | sort | paste -sd' ')
    case "$may" in '*') ok=$(printf '%s' "$table" | grep -c everything || true) ;;
      '') ok=$(printf '%s' "$table" | grep -c 'nothing internal' || true) ;;
      *) [ "$named" = "$want" ] && ok=1 || ok=0 ;; esac
    if [ "$ok" = 0 ]; then
      echo "layering: src/lib.rs's row for $room ($table) differs from .ci/run's ($may)"
      fail=1
    fi
  fi
  [ "$may" = '*' ] && continue
  forbidden=$(for r in $rooms; do
    [ "$r" = "$room" ] || [[ " $may " == *" $r "* ]] || echo "$r"
  done | paste -sd'|')
  [ -n "$forbidden" ] || continue
  path=src/$room
  [ -d "$path" ] || path=src/$room.rs
  if grep -rnE "crate::($forbidden)\b" "$path"; then
    echo "layering: src/$room may use only: ${may:-nothing internal}"
    fail=1
  fi
done
# A grouped `crate::{a, b}` would hide the rooms it names from the check above.
if grep -rnE 'crate::\{' src; then
  echo "layering: write one crate::<room>::... path per room, not crate::{...}"
  fail=1
fi
[ "$fail" = 0 ] && echo "layering: every room has its row; no room uses one it may not"
[ "$fail" = 0 ]
