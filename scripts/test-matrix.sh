#!/usr/bin/env bash
# `npm test`: type check, lint and build once, then the vitest suite on the machine's Node
# and on every version in TEST_NODE_VERSIONS (default "22 24"; empty: the machine's only).
# Those versions come from the npm registry's `node` package, installed once into
# FOREMAN_NODE_CACHE (default ~/.cache/foreman-node/<major>). Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

versions="${TEST_NODE_VERSIONS-22 24}"
cache="${FOREMAN_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foreman-node}"

step() { printf '\n== %s\n' "$*"; }

# Install every Node first, so a missing one fails the run before the long part.
declare -A node_bin=()
for major in $versions; do
  dir="$cache/$major"
  bin="$dir/node_modules/node/bin/node"
  if [ ! -x "$bin" ]; then
    step "installing Node $major from the npm registry (package node@$major) into $dir"
    mkdir -p "$dir"
    if ! npm install --prefix "$dir" --no-save --no-audit --no-fund "node@$major" >"$dir/install.log" 2>&1 || [ ! -x "$bin" ]; then
      echo "test-matrix: could not install Node $major (npm install node@$major into $dir failed; see $dir/install.log)." >&2
      echo "test-matrix: check access to the npm registry, or set TEST_NODE_VERSIONS to the versions to test (e.g. TEST_NODE_VERSIONS=\"\")." >&2
      exit 1
    fi
  fi
  node_bin[$major]="$bin"
done

step "type check";   npm run typecheck
step "lint";         npm run lint
step "build";        npm run build

# Tests that kill and restart database servers run after the rest, one file at a time: beside
# another heavy file on 2 cores they timed out (both pass alone, every time).
solo=(test/integration/database-outage.test.ts test/integration/embedded-db.test.ts)
excludes=()
for f in "${solo[@]}"; do excludes+=(--exclude "$f"); done

suite() { # $1: the node binary; the rest: vitest arguments
  local bin=$1
  shift
  # Its own node first on PATH, so whatever the tests spawn runs on it too.
  PATH="$(dirname "$bin"):$PATH" "$bin" node_modules/vitest/vitest.mjs run "${excludes[@]}" "$@"
  PATH="$(dirname "$bin"):$PATH" "$bin" node_modules/vitest/vitest.mjs run --no-file-parallelism "${solo[@]}"
}

step "vitest on Node $(node --version) (the machine's)"
suite "$(command -v node)" "$@"
for major in $versions; do
  bin="${node_bin[$major]}"
  step "vitest on Node $("$bin" --version)"
  suite "$bin" "$@"
done
