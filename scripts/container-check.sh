#!/usr/bin/env bash
# Builds the container image (Dockerfile) with the tools Debian ships and runs it, runs
# compose.yaml with podman-compose, and validates the Kubernetes example offline. Not part of
# `npm test` (it takes minutes). Steps, by argument:
#   image        build, then the web role on the embedded FerretDB until /readyz answers,
#                GET /status, and a sandboxed command through bubblewrap inside the container
#   compose      build, then compose.yaml + deploy/compose.ferretdb.yaml (FerretDB from the
#                image in place of docker.io's mongo) with Debian's podman-compose: MongoDB
#                wire server, web and worker on a compose network with the data volume;
#                /readyz, a key, the admin CLI, a plain-git task taken by the worker (Agenda),
#                bubblewrap inside the worker with compose.yaml's security options
#   kubernetes   deploy/kubernetes/*.yaml against the Kubernetes schemas, offline
#                (scripts/validate-kubernetes.mjs; no container runtime needed)
#
#   bash scripts/container-check.sh                    # image kubernetes
#   bash scripts/container-check.sh all                # image compose kubernetes
#   bash scripts/container-check.sh compose            # one step (COMPOSE=1 adds it to the default)
#   KEEP=1 bash scripts/container-check.sh ...         # leave the containers running
#   SKIP_BUILD=1 bash scripts/container-check.sh ...   # run the image as it is, if it exists
#
# Nothing is pulled from a container registry: the Dockerfile's bases are made here and
# tagged with the names the Dockerfile uses,
#   docker.io/library/node:24-bookworm-slim   Debian bookworm (debootstrap, minbase) with Node
#                                             and npm from the npm registry (packages `node`,
#                                             `npm`), as the official image has them, and its
#                                             dpkg rules leaving out documentation, manuals
#                                             and translations, as Debian's slim images do;
#   docker.io/library/golang:1.24-bookworm    that base with this machine's Go (/usr/local/go
#                                             or `go env GOROOT`), to build FerretDB.
# They are made once and kept (podman images); REBASE=1 makes them again.
#
# Needs root (or sudo) for debootstrap; installs podman, buildah and debootstrap with
# apt-get when missing. Everything it does is printed; a step that cannot run here says why.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_MAJOR="${NODE_MAJOR:-24}"
NODE_TAG="docker.io/library/node:${NODE_MAJOR}-bookworm-slim"
GO_TAG="docker.io/library/golang:1.24-bookworm"
IMAGE="${FOREMAN_IMAGE:-localhost/foreman:local}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
NAME="foreman-check-$$"
PROJECT="foreman-check-$$"
work=$(mktemp -d)
step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
# Every command of the compose step is printed before it runs.
show() { printf '+ %s\n' "$*" >&2; "$@"; }
compose_cmd=()
made_env=""
cleanup() {
  if [ -z "${KEEP:-}" ]; then
    if command -v podman >/dev/null; then podman rm -f -v "$NAME" >/dev/null 2>&1 || true; fi
    if [ ${#compose_cmd[@]} -gt 0 ]; then
      "${compose_cmd[@]}" down -v >/dev/null 2>&1 || true
      # podman-compose 1.0's down leaves the project's network.
      podman network rm "${PROJECT}_default" >/dev/null 2>&1 || true
    fi
  fi
  if [ -n "$made_env" ]; then rm -f .env; fi
  rm -rf "$work"
}
trap cleanup EXIT

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(image kubernetes ${COMPOSE:+compose})
[ "${steps[*]}" != all ] || steps=(image compose kubernetes)
want() { [[ " ${steps[*]} " == *" $1 "* ]]; }
for s in "${steps[@]}"; do
  case "$s" in image | compose | kubernetes) ;; *) echo "unknown step: $s (image, compose, kubernetes, all)"; exit 2 ;; esac
done
echo "steps: ${steps[*]}"

# Kubernetes first: it needs no container runtime and takes seconds.
if want kubernetes; then
  step "Kubernetes manifests (deploy/kubernetes/*.yaml), offline"
  # kubeconform (Go module proxy) builds here, but its schemas come only from GitHub over
  # the network, and `kubectl --dry-run` needs an API server. kubernetes-models (npm) is
  # generated from the Kubernetes OpenAPI document: its JSON Schema validators and, through
  # tsc, its types (unknown fields) check each document.
  show npm install --prefix "$work/k8s" --no-save --no-audit --no-fund --loglevel=error kubernetes-models@5.1.0 >/dev/null
  show node scripts/validate-kubernetes.mjs "$work/k8s" deploy/kubernetes/*.yaml
fi
if ! want image && ! want compose; then step "done"; exit 0; fi

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# How containers are run: podman's defaults, unless they fail here (then the reason is
# printed and a fallback is tried). Set by probe_runtime below.
RUN_OPTS=()
BUD_OPTS=()

step "tools"
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if want compose; then command -v podman-compose >/dev/null || missing+=(podman-compose); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  sudo_ apt-get update -qq
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
podman --version
buildah --version

if [ -n "${REBASE:-}" ] || ! podman image exists "$NODE_TAG"; then
  step "base image $NODE_TAG: debootstrap bookworm (minbase) from $MIRROR"
  rootfs="$work/rootfs"
  sudo_ debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
  # Debian's slim images (the official node:*-slim's base) install no documentation, manual
  # pages or translations: the same rule here, so the image's size compares.
  sudo_ mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d"
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/man/*' 'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/info/*' \
    'path-exclude /usr/share/lintian/*' 'path-exclude /usr/share/linda/*' 'path-exclude /usr/share/locale/*' |
    sudo_ tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker" >/dev/null
  sudo_ find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  sudo_ rm -rf "$rootfs/usr/share/man"/* "$rootfs/usr/share/info"/* "$rootfs/usr/share/locale"/*
  step "Node $NODE_MAJOR and npm from the npm registry (packages node@$NODE_MAJOR, npm@11)"
  npm install --prefix "$work/node" --no-save --no-audit --no-fund "node@$NODE_MAJOR" >/dev/null
  npm install --prefix "$work/npm" --no-save --no-audit --no-fund npm@11 >/dev/null
  node_bin=$(readlink -f "$work/node/node_modules/node/bin/node")
  "$node_bin" --version
  sudo_ install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  sudo_ mkdir -p "$rootfs/usr/local/lib/node_modules"
  sudo_ cp -a "$work/npm/node_modules/npm" "$rootfs/usr/local/lib/node_modules/npm"
  sudo_ ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  sudo_ ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  # The official image's user 1000 (`node`); the Dockerfile adds its own user.
  sudo_ rm -rf "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/var/lib/apt/lists"/*
  sudo_ tar -C "$rootfs" -c . | podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["node"]' - "$NODE_TAG"
  sudo_ rm -rf "$rootfs"
fi
# podman's defaults ask for RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 4194304, crun for a pure
# cgroup v2 (or v1) layout, and netavark for network namespaces. Inside a VM or container
# without CAP_SYS_RESOURCE, with hybrid cgroups or restricted netns, these fail:
#   crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted
#   crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2
#   netavark: setns: IO error: Invalid argument
# The fallback: runc (apt-get install runc), limits within this shell's, the host's network,
# and chroot isolation for the build's RUN steps.
# A machine whose egress goes through a TLS-inspecting proxy trusts extra CAs
# (/usr/local/share/ca-certificates); the local base gets this machine's bundle, or npm ci,
# the Go module proxy and apt over https fail inside the build (SELF_SIGNED_CERT_IN_CHAIN).
# The Dockerfile itself stays free of it: a real node image needs none of this.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null &&
  [ "$(podman image inspect --format '{{index .Config.Labels "foreman.local-ca"}}' "$NODE_TAG")" != 1 ]; then
  step "this machine's CA bundle into $NODE_TAG (extra CAs: $(ls /usr/local/share/ca-certificates | tr '\n' ' '))"
  ctr=$(buildah from "$NODE_TAG")
  buildah copy "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
  buildah copy "$ctr" /usr/local/share/ca-certificates /usr/local/share/ca-certificates >/dev/null
  buildah config --label foreman.local-ca=1 --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "$ctr"
  buildah commit --quiet "$ctr" "$NODE_TAG" >/dev/null
  buildah rm "$ctr" >/dev/null
fi

step "probe: can podman run a container here?"
if out=$(podman run --rm "$NODE_TAG" sh -c 'node --version && npm --version' 2>&1); then
  echo "$out"
else
  echo "podman's defaults fail here: $out"
  command -v runc >/dev/null || sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc
  nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] || [ "$nofile" -gt 8192 ] && nofile=8192
  [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
  BUD_OPTS=(--isolation chroot)
  # The limits alone first: the compose step needs podman's own networks (service names).
  RUN_OPTS=(--runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  echo "retrying with: ${RUN_OPTS[*]}"
  if ! podman run --rm "${RUN_OPTS[@]}" "$NODE_TAG" sh -c 'node --version && npm --version'; then
    RUN_OPTS+=(--network host)
    echo "retrying with: ${RUN_OPTS[*]}"
    podman run --rm "${RUN_OPTS[@]}" "$NODE_TAG" sh -c 'node --version && npm --version'
  fi
fi

if [ -n "${REBASE:-}" ] || ! podman image exists "$GO_TAG"; then
  goroot=$(go env GOROOT 2>/dev/null || echo /usr/local/go)
  step "Go image $GO_TAG: $NODE_TAG with this machine's Go ($goroot)"
  [ -x "$goroot/bin/go" ] || { echo "no Go at $goroot: set WITH_FERRETDB=false or install Go"; exit 1; }
  ctr=$(buildah from "$NODE_TAG")
  buildah copy "$ctr" "$goroot" /usr/local/go >/dev/null
  buildah config --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit --quiet "$ctr" "$GO_TAG" >/dev/null
  buildah rm "$ctr" >/dev/null
fi

if [ -n "${SKIP_BUILD:-}" ] && podman image exists "$IMAGE"; then
  step "SKIP_BUILD: using the existing $IMAGE (built $(podman image inspect --format '{{.Created}}' "$IMAGE"))"
else
  step "build $IMAGE (Dockerfile, buildah bud --format docker: keeps HEALTHCHECK)"
  started=$(date +%s)
  buildah bud --format docker --layers --pull=never "${BUD_OPTS[@]}" \
    --build-arg "NODE_IMAGE=$NODE_TAG" --build-arg "GO_IMAGE=$GO_TAG" \
    -t "$IMAGE" -f Dockerfile .
  echo "built in $(($(date +%s) - started)) s"
fi
podman image inspect --format 'size {{.Size}} bytes; healthcheck {{.HealthCheck.Test}}; user {{.User}}' "$IMAGE" ||
  podman image inspect --format 'size {{.Size}} bytes; user {{.User}}' "$IMAGE"

if want image; then
step "run the web role on the embedded FerretDB (security options: docs/operations.md)"
port="${PORT_ON_HOST:-3939}"
if [[ " ${RUN_OPTS[*]} " == *" --network host "* ]]; then
  publish=(-e "PORT=$port" -e HOST=127.0.0.1)
else
  publish=(-p "127.0.0.1:$port:3000")
fi
podman run -d --name "$NAME" "${publish[@]}" "${RUN_OPTS[@]}" \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt unmask=ALL --security-opt label=disable \
  -e OPEN_SIGNUP=true "$IMAGE" >/dev/null
ready=""
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; then ready=1; break; fi
  sleep 1
done
podman logs "$NAME" 2>&1 | tail -20 | cut -c1-300
[ -n "$ready" ] || { echo "container-check: /readyz did not answer within 120 s"; exit 1; }
echo "readyz: $(curl -s "http://127.0.0.1:$port/readyz")"
key=$(curl -sf -X POST -H 'content-type: application/json' -d '{"name":"check"}' \
  "http://127.0.0.1:$port/keys/generate" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).key))')
echo "status: $(curl -sf -H "X-API-Key: $key" "http://127.0.0.1:$port/status")"

step "a repository command in the service's own sandbox (bubblewrap) inside the container"
podman exec "$NAME" sh -c 'id; bwrap --version'
# runSandboxed (src/sandbox/run.ts) as a worker runs a verification command: user, PID,
# network namespaces, /workspace, limits. The worker's start check passed already (the
# `sandbox ready` line above); this runs a command for real.
if podman exec "$NAME" sh -c 'mkdir -p /tmp/wc && cd /app && node --input-type=module -e "
  const s = await import(\"/app/dist/sandbox/index.js\");
  s.configureSandbox({ engine: \"bwrap\", network: \"none\", hiddenPaths: [\"/data\"] });
  const r = await s.runSandboxed(\"echo inside: uid \$(id -u), cwd \$(pwd); ls /data 2>&1 | head -1; (getent hosts example.com || echo no network) | head -1\", { cwd: \"/tmp/wc\", timeoutMs: 60000 });
  console.log(r.output.trim()); process.exit(r.ok ? 0 : 1);
"'; then
  echo "sandbox: ok"
else
  echo "sandbox: FAILED inside the container (see docs/operations.md, 'In a container')"
  exit 1
fi
if podman healthcheck run "$NAME" >/dev/null 2>&1; then echo "HEALTHCHECK (podman healthcheck run): healthy"; else echo "HEALTHCHECK (podman healthcheck run): unhealthy"; fi
[ -n "${KEEP:-}" ] || podman rm -f -v "$NAME" >/dev/null
fi

if want compose; then
  source scripts/container-check-compose.sh
fi
step "done"
