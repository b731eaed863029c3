# The foreman service: one image for the web and the worker roles (docs/operations.md,
# "Containers"). Build: `docker build -t foreman .` (or `buildah bud --format docker`, which
# keeps the HEALTHCHECK); scripts/container-check.sh builds and runs it with podman.
#
#   --build-arg WITH_FERRETDB=false   no embedded database (set MONGODB_URI); no Go needed
#   --build-arg NODE_IMAGE=…          the Node base (Debian bookworm: the sandbox's packages
#                                     come from Debian, scripts/setup.sh)
#
# What the image holds (docs/operations.md, "The image"), and why; no compiler, no build tool:
#   Node 24 (node:24-bookworm-slim, with npm: repositories' own install steps run with it)
#   git, ca-certificates, curl          clones and pushes over https
#   bubblewrap, util-linux, slirp4netns, iproute2, tinyproxy
#                                       the sandbox repository commands run in, its network
#                                       and the setup step's allowlist (scripts/setup.sh)
#   python3 with pytest, coverage, pip  Python repositories' checks and health scans
#   dist/ and the production node_modules, without type declarations and source maps
#                                       (TypeScript's own lib files stay: health scans read them)
#   FerretDB, the embedded database, built in its own stage (WITH_FERRETDB=false: none)
# The build stage's dev dependencies and the Go toolchain stay in their stages. apt installs
# without recommended packages: python3-pip's would bring gcc, g++ and the Python headers.
ARG NODE_IMAGE=docker.io/library/node:24-bookworm-slim
ARG GO_IMAGE=docker.io/library/golang:1.24-bookworm

# 1. The build: dependencies, tsc and the dashboard, then only the runtime dependencies, less
#    what only a compiler or a debugger reads (type declarations, source maps; TypeScript's
#    lib.*.d.ts stay: src/health/doc-js.ts reads them).
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# npm ci's postinstall (scripts/node-runtime.mjs: nothing to do on this Node) comes first.
COPY package.json package-lock.json .nvmrc ./
COPY scripts/node-runtime.mjs ./scripts/node-runtime.mjs
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY web ./web
RUN npm run build && npm prune --omit=dev --no-audit --no-fund \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) \
      -not -path 'node_modules/typescript/*' -delete

# 2. FerretDB, the embedded MongoDB-compatible server, built the way the service builds it
#    on a first start (src/db/embedded.ts, with its patches), into the cache it looks in.
#    From that one file only (Node runs it as TypeScript), not from the build stage: a change
#    elsewhere in the service then reuses this stage's cache instead of building Go again.
FROM ${GO_IMAGE} AS go
FROM ${NODE_IMAGE} AS ferretdb
ARG WITH_FERRETDB=true
COPY --from=go /usr/local/go /usr/local/go
ENV XDG_CACHE_HOME=/opt/foreman-cache
COPY src/db/embedded.ts /tmp/ferretdb/embedded.mts
RUN mkdir -p /opt/foreman-cache/foreman && if [ "$WITH_FERRETDB" = true ]; then \
      PATH=/usr/local/go/bin:$PATH GOPATH=/tmp/go GOCACHE=/tmp/go-cache \
      node --experimental-transform-types --no-warnings -e 'import("/tmp/ferretdb/embedded.mts").then((m) => m.ensureFerretdb()).then((b) => console.log("FerretDB:", b))' \
      && rm -rf /tmp/go /tmp/go-cache; \
    fi

# 3. The runtime: Node 24, the sandbox's system packages, git, the built service. setup.sh
#    installs without recommended packages too (its Node step needs the checkout: skipped).
#    apt's lists and its package caches (*.bin: 75 MB where the base does not turn them off)
#    go in the same step.
FROM ${NODE_IMAGE} AS runtime
COPY scripts/setup.sh /tmp/setup.sh
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates curl \
 && bash /tmp/setup.sh \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /tmp/setup.sh
# A user of its own: bubblewrap then makes unprivileged user namespaces, as on a host
# (the container needs the security options of docs/operations.md, "In a container").
RUN useradd --uid 10001 --create-home --home-dir /home/foreman --shell /usr/sbin/nologin foreman \
 && mkdir -p /data && chown foreman:foreman /data
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=ferretdb --chown=foreman:foreman /opt/foreman-cache /opt/foreman-cache
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data \
    XDG_CACHE_HOME=/opt/foreman-cache \
    FOREMAN_BUILD=never
USER foreman
VOLUME /data
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e 'fetch("http://127.0.0.1:" + (process.env.PORT || 3000) + "/readyz").then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))'
# `node dist/main.js` serves HTTP (and runs the workers unless RUN_WORKERS=false);
# `node dist/main.js worker` runs only the workers.
CMD ["node", "dist/main.js"]
