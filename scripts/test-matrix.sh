#!/usr/bin/env bash
# `npm test`: build once, then the whole vitest suite on the machine's Node (under npm, the one
# scripts/setup.sh provides where the machine's is older: scripts/node-runtime.mjs), and beside it a
# second lane: the type checks and linters, then the runtime-sensitive files (marked in the
# files themselves, with the reason: see below) on every version in TEST_NODE_VERSIONS
# (default "22 24", less the whole suite's major; empty: the machine's only). Those versions come from the npm registry's
# `node` package, installed once into FOREMAN_NODE_CACHE (default
# ~/.cache/foreman-node/<major>). Extra arguments go to the vitest runs of the whole suite
# and of the runtime-sensitive files (not to the one-at-a-time database files, as before).
set -euo pipefail
cd "$(dirname "$0")/.."

versions="${TEST_NODE_VERSIONS-22 24}"
# The whole suite's Node already runs the runtime-sensitive files: a lane of its major would run
# them again. Under `npm test` that is node_modules/.bin/node where scripts/setup.sh provided Node
# 22 (this machine's being older), so the lanes add 24.
suite_major="$(node -p 'process.versions.node.split(".")[0]')"
lanes=""
for major in $versions; do [ "$major" = "$suite_major" ] || lanes="${lanes:+$lanes }$major"; done
versions="$lanes"
cache="${FOREMAN_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foreman-node}"

step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

# The lists come from a marker line in each test file, with its reason beside it, so a new
# file joins them by saying so (and nothing here changes):
#   // test-matrix: runtime-sensitive: <why it behaves differently from one Node major to the next>
#   // test-matrix: solo: <why it must run alone>
# Runtime-sensitive files run on every version; the rest of the suite (the domain, routes,
# integrations, the model loop, the crash recovery of jobs and leases, the hostile repository
# behind bubblewrap: plain JavaScript over fetch, the database driver, git and the kernel's
# namespaces) runs on the machine's Node only. What qualifies: the service's own processes
# started with that Node (start, roles, the admin CLI, the .env loader), the database launcher
# and its keeper, the sandbox running repository code with that Node on PATH, coverage
# measured with V8, prompt files loaded from dist/, and Node's HTTP and WebSocket server edges.
# Solo files (they kill and restart database servers; beside another heavy file on 2 cores
# they timed out, and pass alone every time) run after the rest, one at a time.
marked() { grep -rlE "^// test-matrix: $1:" test --include='*.test.ts' | sort; }
mapfile -t solo < <(marked solo)
runtime_sensitive=()
runtime_solo=()
while IFS= read -r f; do
  if printf '%s\n' "${solo[@]}" | grep -qxF "$f"; then runtime_solo+=("$f"); else runtime_sensitive+=("$f"); fi
done < <(marked runtime-sensitive)
[ "${#runtime_sensitive[@]}" -gt 0 ] || { echo "test-matrix: no file is marked runtime-sensitive." >&2; exit 1; }

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

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The build first (the tests that start dist/main.js need it): emitted without type checking
# (`--noCheck`: isolatedModules makes the emit per file), so the tests start after ~20 s.
step "build"
npx tsc -p tsconfig.build.json --noCheck
node scripts/copy-prompts.mjs
npx vite build --config web/vite.config.ts --logLevel warn

# $1: the node binary; $2: the run's name in the closing summary of failures; the rest: vitest
# arguments. Its own node first on PATH, so whatever the tests spawn runs on it too. Each run
# also writes a JSON report, from which scripts/test-failures.mjs prints what failed at the
# very end of the output (a failure of the first lane is otherwise thousands of lines above
# it).
reports=()
report_of() { printf '%s/report-%s.json' "$logs" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9' '-')"; }
vitest_on() {
  local bin=$1 label=$2
  shift 2
  local report
  report=$(report_of "$label")
  reports+=("$label=$report")
  PATH="$(dirname "$bin"):$PATH" "$bin" node_modules/vitest/vitest.mjs run \
    --reporter=default --reporter=json --outputFile.json="$report" "$@"
}
failed_summary() {
  printf '\n== what failed (%s)\n' "$(date -u +%H:%M:%S)"
  node scripts/test-failures.mjs "${reports[@]}" || true
}

# The tests wait on processes, git, the sandbox and the database more than they compute: the
# whole suite runs two files at a time, and a second lane fills the cores beside it: the checks
# (type check of the service, its tests and the dashboard, then the linters), then the
# runtime-sensitive files on each other Node, two at a time (FOREMAN_TEST_WORKERS sets both).
# Three files at a time in the suite was no faster on a fresh clone (626 and 670 s against
# 598-643 s for two), and the checks at the tests' priority no faster either.
# Its output is shown when it ends; a failure in either lane fails the run.
# The type checks and linters keep what they worked out between runs of this checkout (by
# file content, so a fresh clone at the same path starts warm), in FOREMAN_CHECK_CACHE
# (default ~/.cache/foreman-checks/<hash of the checkout's path>): about a minute of the two
# cores' time when little changed.
checks_cache="${FOREMAN_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/foreman-checks/$(pwd | sha256sum | cut -c1-12)}"
mkdir -p "$checks_cache"
lane() {
  set -e
  # At a lower priority: pure computation, with no timing to keep, beside tests that wait on
  # processes and bound their waits.
  echo "-- type check (service, tests, scripts) ($(date -u +%H:%M:%S))"
  nice -n 10 npx tsc --noEmit --incremental --tsBuildInfoFile "$checks_cache/service.tsbuildinfo"
  echo "-- type check (dashboard) ($(date -u +%H:%M:%S))"
  nice -n 10 npx tsc --noEmit -p web/tsconfig.json --incremental --tsBuildInfoFile "$checks_cache/web.tsbuildinfo"
  echo "-- lint ($(date -u +%H:%M:%S))"; LINT_CACHE="$checks_cache" nice -n 10 npm run --silent lint
  # Every version runs even when one fails, so a run reports all of them.
  local failed=0
  for major in $versions; do
    bin="${node_bin[$major]}"
    printf '\n== vitest, the runtime-sensitive files, on Node %s (%s)\n' "$("$bin" --version)" "$(date -u +%H:%M:%S)"
    vitest_on "$bin" "runtime-sensitive files on Node $major" "${runtime_sensitive[@]}" "$@" || failed=1
  done
  return "$failed"
}
step "checks, then the runtime-sensitive files on Node ${versions:-(none)}, beside the whole suite"
lane "$@" >"$logs/lane" 2>&1 &
lane_pid=$!

ok=0
step "vitest, the whole suite, on Node $(node --version) ($(command -v node))"
excludes=()
for f in "${solo[@]}"; do excludes+=(--exclude "$f"); done
vitest_on "$(command -v node)" "the whole suite" "${excludes[@]}" "$@" || ok=1

step "waiting for the checks and the runtime-sensitive files"
wait "$lane_pid" || ok=1
cat "$logs/lane"
if [ "$ok" != 0 ]; then
  # The lane ran in a subshell: its reports are named here again. A missing one means the
  # lane stopped at the checks, before that run.
  for major in $versions; do
    label="runtime-sensitive files on Node $major"
    [ ! -f "$(report_of "$label")" ] || reports+=("$label=$(report_of "$label")")
  done
  failed_summary
  echo "test-matrix: the checks or the tests failed (what failed is listed just above; the checks' errors are in the lane's output)." >&2
  exit 1
fi

if [ "${#solo[@]}" -gt 0 ]; then
  step "vitest, the files that run alone, on Node $(node --version)"
  vitest_on "$(command -v node)" "the files that run alone" --no-file-parallelism "${solo[@]}" ||
    { failed_summary; exit 1; }
fi
if [ "${#runtime_solo[@]}" -gt 0 ]; then
  for major in $versions; do
    bin="${node_bin[$major]}"
    step "vitest, the runtime-sensitive files that run alone, on Node $("$bin" --version)"
    vitest_on "$bin" "runtime-sensitive files that run alone on Node $major" --no-file-parallelism "${runtime_solo[@]}" ||
      { failed_summary; exit 1; }
  done
fi
