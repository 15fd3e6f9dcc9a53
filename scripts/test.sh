#!/usr/bin/env bash
# The test command (README.md, "Run the tests"; `.ci/run` runs it too): the whole suite under
# cargo-nextest, which it installs first when it is missing (`cargo install --locked
# cargo-nextest`, a few minutes once). Arguments go to `cargo nextest run`.
#
# The fixture tests read ../shared/fixtures beside the repository (or $LOUPE_FIXTURES and the
# other variables README.md names); where a set is missing its tests fail, naming
# `scripts/fetch-fixtures.sh`, which fetches it from its public source.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest is not installed: installing it (cargo install --locked cargo-nextest)" >&2
  cargo install --locked cargo-nextest
fi
exec cargo nextest run --locked --no-fail-fast "$@"
