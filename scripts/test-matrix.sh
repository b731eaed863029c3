#!/usr/bin/env bash
# `npm test`: type check, lint and build once, then the whole vitest suite on the machine's
# Node and the runtime-sensitive files (listed below, with the reason) on every version in
# TEST_NODE_VERSIONS (default "22 24"; empty: the machine's only). Those versions come from
# the npm registry's `node` package, installed once into FOREMAN_NODE_CACHE (default
# ~/.cache/foreman-node/<major>). Extra arguments go to the vitest runs of the whole suite
# and of the runtime-sensitive files (not to the one-at-a-time database files, as before).
set -euo pipefail
cd "$(dirname "$0")/.."

versions="${TEST_NODE_VERSIONS-22 24}"
cache="${FOREMAN_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foreman-node}"

step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

# Tests that kill and restart database servers run after the rest, one file at a time: beside
# another heavy file on 2 cores they timed out (both pass alone, every time).
solo=(test/integration/database-outage.test.ts test/integration/embedded-db.test.ts)

# Runtime-sensitive: what behaves differently from one Node major to the next. They run on
# every version; the rest of the suite (the domain, routes, integrations, the model loop:
# plain JavaScript over fetch, the database driver and git) runs on the machine's Node only.
#  - the service's own processes started with that Node: start, roles, the admin CLI, the
#    .env loader, the worker and fix crash tests (dist/ run by the runtime under test);
#  - the database launcher and its keeper (child processes, signals, flock, sockets);
#  - the sandbox, which runs repository code with that Node on PATH, and the hostile repo;
#  - coverage measured with V8 (c8, vitest's v8 provider) and the TypeScript-in-dist loader;
#  - a smoke set of the HTTP and WebSocket server: Node's http limits and timeouts, slow
#    WebSocket readers, graceful shutdown of open connections.
runtime_sensitive=(
  test/integration/start.test.ts
  test/integration/roles.test.ts
  test/integration/admin-cli.test.ts
  test/integration/env-file.test.ts
  test/integration/worker-crash.test.ts
  test/integration/fix-crash.test.ts
  test/unit/sandbox.test.ts
  test/unit/sandbox-network.test.ts
  test/integration/agent-sandbox.test.ts
  test/integration/hostile-repo.test.ts
  test/unit/health-coverage-runners.test.ts
  test/unit/prompt-files.test.ts
  test/integration/http-limits.test.ts
  test/integration/ws-slow-readers.test.ts
  test/integration/shutdown.test.ts
)
runtime_solo=(test/integration/embedded-db.test.ts)
for f in "${runtime_sensitive[@]}" "${runtime_solo[@]}"; do
  [ -e "$f" ] || { echo "test-matrix: $f is in the runtime-sensitive list but does not exist." >&2; exit 1; }
done

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

# The checks and the build in two lanes, one per core: each tool is mostly single-threaded.
# Lane 1 type-checks the service and its tests, then emits dist/ without checking again
# (`--noCheck`: the same files were just checked with the same options; isolatedModules makes
# the emit per file) and builds the dashboard. Lane 2 type-checks the dashboard and runs the
# linters. Each lane's output is shown when it ends; a failing lane fails the run.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
lane1() {
  set -e
  echo "-- type check (service, tests, scripts)"; npx tsc --noEmit
  echo "-- build"; npx tsc -p tsconfig.build.json --noCheck
  node scripts/copy-prompts.mjs
  npx vite build --config web/vite.config.ts --logLevel warn
}
lane2() {
  set -e
  echo "-- type check (dashboard)"; npx tsc --noEmit -p web/tsconfig.json
  echo "-- lint"; npm run --silent lint
}
step "type check, lint and build"
lane1 >"$logs/1" 2>&1 &
pid1=$!
lane2 >"$logs/2" 2>&1 &
pid2=$!
ok=0
wait "$pid1" || ok=1
cat "$logs/1"
wait "$pid2" || ok=1
cat "$logs/2"
[ "$ok" = 0 ] || { echo "test-matrix: the checks or the build failed (above)." >&2; exit 1; }

# $1: the node binary; $2: "all" or "sensitive"; the rest: vitest arguments.
suite() {
  local bin=$1 scope=$2
  shift 2
  local vitest=(node_modules/vitest/vitest.mjs run)
  # Its own node first on PATH, so whatever the tests spawn runs on it too.
  local path_with="$(dirname "$bin"):$PATH"
  if [ "$scope" = all ]; then
    local excludes=()
    for f in "${solo[@]}"; do excludes+=(--exclude "$f"); done
    PATH="$path_with" "$bin" "${vitest[@]}" "${excludes[@]}" "$@"
    PATH="$path_with" "$bin" "${vitest[@]}" --no-file-parallelism "${solo[@]}"
  else
    PATH="$path_with" "$bin" "${vitest[@]}" "${runtime_sensitive[@]}" "$@"
    PATH="$path_with" "$bin" "${vitest[@]}" --no-file-parallelism "${runtime_solo[@]}"
  fi
}

step "vitest, the whole suite, on Node $(node --version) (the machine's)"
suite "$(command -v node)" all "$@"
for major in $versions; do
  bin="${node_bin[$major]}"
  step "vitest, the runtime-sensitive files, on Node $("$bin" --version)"
  suite "$bin" sensitive "$@"
done
