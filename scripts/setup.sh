#!/usr/bin/env bash
# Node, where the machine's is older than package.json's engines.node (Node 22 from 22.13, or
# 24 and newer): the major in .nvmrc from the npm registry's `node` package, into
# FOREMAN_NODE_CACHE (default ~/.cache/foreman-node/<major>, as scripts/test-matrix.sh does).
# The machine's Node stays; `npm ci`'s postinstall links that one as node_modules/.bin/node,
# which npm puts first on the PATH of every script it runs (scripts/node-runtime.mjs).
#
# System packages the service and its tests need beyond Node and git, installed from
# Debian's packages when missing (as root, or through sudo); each is named when it cannot be.
# Without their recommended packages: python3-pip's would bring gcc, g++ and the Python
# headers (some 300 MB in the image) that nothing here compiles with.
#   bubblewrap           the sandbox repository commands run in (src/sandbox/run.ts)
#   util-linux           flock, prlimit, unshare and setpriv (embedded database lock, sandbox
#                        limits, the sandbox's public network)
#   slirp4netns,
#   iproute2             SANDBOX_NETWORK=public: user-mode networking, and the rules keeping the
#                        host and private ranges out (src/sandbox/network.ts)
#   tinyproxy            the setup step's allowlist: installs reach only the registries of
#                        SANDBOX_SETUP_ALLOW through it (src/sandbox/setup-proxy.ts)
#   chromium             the dashboard's end-to-end tests (test/e2e), with --test only
#   python3-coverage,
#   python3-pytest       Python coverage in health scans (src/health/coverage.ts)
#   python3-pip          the setup step's Python installs: pip of the worker's Python, run in
#                        a venv made without a pip of its own (src/ecosystems/python.ts)
set -euo pipefail

# The Node step needs the checkout (the image's runtime stage runs this file alone, on its
# base image's Node 24).
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -f "$root/scripts/node-runtime.mjs" ] && [ -f "$root/.nvmrc" ]; then
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: no node and npm on the PATH: install Node $(cat "$root/.nvmrc") LTS (https://nodejs.org) and run again." >&2
    exit 1
  fi
  if ! node "$root/scripts/node-runtime.mjs" check 2>/dev/null &&
    ! node "$root/scripts/node-runtime.mjs" cached >/dev/null; then
    major="$(cat "$root/.nvmrc")"
    dir="$(node "$root/scripts/node-runtime.mjs" prefix)"
    echo "setup: this machine's Node $(node --version) is older than the service needs; installing Node $major from the npm registry (package node@$major) into $dir" >&2
    mkdir -p "$dir"
    if ! npm install --prefix "$dir" --no-save --no-audit --no-fund "node@$major" >"$dir/install.log" 2>&1 ||
      ! node "$root/scripts/node-runtime.mjs" cached >/dev/null; then
      echo "setup: could not install Node $major into $dir (see $dir/install.log): check access to the npm registry, or install Node $major LTS yourself." >&2
      exit 1
    fi
  fi
  if ! node "$root/scripts/node-runtime.mjs" check 2>/dev/null; then
    echo "setup: npm scripts will run on $("$(node "$root/scripts/node-runtime.mjs" cached)" --version) ($(node "$root/scripts/node-runtime.mjs" cached)), linked as node_modules/.bin/node by npm ci; this machine's node stays $(node --version)." >&2
  fi
fi

want=()
command -v bwrap >/dev/null 2>&1 || want+=(bubblewrap)
{ command -v flock && command -v prlimit && command -v unshare && command -v setpriv; } >/dev/null 2>&1 ||
  want+=(util-linux)
command -v slirp4netns >/dev/null 2>&1 || want+=(slirp4netns)
{ command -v ip || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]; } >/dev/null 2>&1 || want+=(iproute2)
{ command -v tinyproxy || [ -x /usr/sbin/tinyproxy ]; } >/dev/null 2>&1 || want+=(tinyproxy)
if [ "${1:-}" = "--test" ]; then
  [ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || want+=(chromium)
fi
/usr/bin/python3 -c 'import coverage' >/dev/null 2>&1 || want+=(python3-coverage)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || want+=(python3-pytest)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || want+=(python3-pip)

[ ${#want[@]} -eq 0 ] && exit 0
echo "setup: installing ${want[*]}" >&2
if [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}"
elif command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}"
else
  echo "setup: missing ${want[*]}; install them (apt-get install --no-install-recommends ${want[*]}) and run again." >&2
  exit 1
fi
