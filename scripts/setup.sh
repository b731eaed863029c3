#!/usr/bin/env bash
# System packages the service and its tests need beyond Node and git, installed from
# Debian's packages when missing (as root, or through sudo); each is named when it cannot be.
#   bubblewrap           the sandbox repository commands run in (src/util/sandbox.ts)
#   util-linux           flock, prlimit, unshare and setpriv (embedded database lock, sandbox
#                        limits, the sandbox's public network)
#   slirp4netns,
#   iproute2             SANDBOX_NETWORK=public: user-mode networking, and the rules keeping the
#                        host and private ranges out (src/util/sandbox-network.ts)
#   tinyproxy            the setup step's allowlist: installs reach only the registries of
#                        SANDBOX_SETUP_ALLOW through it (src/util/setup-proxy.ts)
#   chromium             the dashboard's end-to-end tests (test/e2e), with --test only
#   python3-coverage,
#   python3-pytest       Python coverage in health scans (src/health/coverage.ts)
#   python3-pip          the setup step's Python installs: pip of the worker's Python, run in
#                        a venv made without a pip of its own (src/ecosystems/python.ts)
set -euo pipefail

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
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"
elif command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"
else
  echo "setup: missing ${want[*]}; install them (apt-get install ${want[*]}) and run again." >&2
  exit 1
fi
