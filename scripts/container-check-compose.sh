# The compose step of scripts/container-check.sh (sourced by it: its variables, `step`,
# `show`, RUN_OPTS, IMAGE, PROJECT, compose_cmd and made_env). Runs compose.yaml as written,
# with deploy/compose.ferretdb.yaml for MongoDB (docker.io's image cannot be pulled here),
# through Debian's podman-compose, and checks what an operator would.
# shellcheck shell=bash

step "compose: compose.yaml + deploy/compose.ferretdb.yaml with $(podman-compose version 2>/dev/null | grep -m1 podman-compose || echo podman-compose)"
if [[ " ${RUN_OPTS[*]} " == *" --network host "* ]]; then
  echo "compose: cannot run here: podman's networks fail on this machine (the probe above), and"
  echo "compose.yaml's services find each other by name on a network of their own."
  exit 1
fi
cport="${COMPOSE_PORT_ON_HOST:-3947}"
if [ ! -e .env ]; then
  # compose.yaml reads .env (copy of .env.example: every line commented out, the defaults).
  cp .env.example .env
  made_env=1
  echo "no .env: using a copy of .env.example for this run (removed at the end)"
fi
# What this check adds, outside compose.yaml: the machine's container limits (the probe), and
# ALLOW_LOCAL_REPOS for the plain-git repository it makes on the data volume.
run_args="${RUN_OPTS[*]} -e ALLOW_LOCAL_REPOS=true"
compose_cmd=(podman-compose -p "$PROJECT" --podman-run-args="$run_args"
  -f compose.yaml -f deploy/compose.ferretdb.yaml)
export FOREMAN_PUBLISH="127.0.0.1:$cport"
echo "FOREMAN_PUBLISH=$FOREMAN_PUBLISH"
show "${compose_cmd[@]}" up -d --no-build >"$work/compose-up.log" 2>&1 || {
  tail -30 "$work/compose-up.log"
  exit 1
}
grep -E '^podman (run|volume create|network create)' "$work/compose-up.log" | cut -c1-400 || true
db="${PROJECT}_mongodb_1" web="${PROJECT}_web_1" worker="${PROJECT}_worker_1"
show podman ps --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}  {{.Status}}  {{.Ports}}'

step "compose: the database (FerretDB from $IMAGE on mongodb:27017)"
# podman-compose 1.0 starts services in depends_on order but does not wait for
# `condition: service_healthy`; the web and the worker retry (restart: unless-stopped).
healthy=""
for _ in $(seq 1 60); do
  if podman healthcheck run "$db" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 2
done
podman logs "$db" 2>&1 | tail -5 | cut -c1-300
[ -n "$healthy" ] || { echo "compose: the mongodb service's healthcheck never passed"; exit 1; }
echo "mongodb healthcheck (podman healthcheck run $db): healthy"

step "compose: the web service until /readyz on 127.0.0.1:$cport"
ready=""
for _ in $(seq 1 180); do
  if curl -sf "http://127.0.0.1:$cport/readyz" >/dev/null; then ready=1; break; fi
  sleep 1
done
podman logs "$web" 2>&1 | tail -12 | cut -c1-300
[ -n "$ready" ] || { echo "compose: /readyz did not answer within 180 s"; exit 1; }
echo "readyz: $(curl -s "http://127.0.0.1:$cport/readyz")"
echo "web restarts: $(podman inspect --format '{{.RestartCount}}' "$web")"
if podman healthcheck run "$web" >/dev/null 2>&1; then echo "web HEALTHCHECK: healthy"; else echo "web HEALTHCHECK: unhealthy"; fi

step "compose: the worker"
started=""
for _ in $(seq 1 120); do
  if podman logs "$worker" 2>&1 | grep -q "sandbox ready"; then started=1; break; fi
  sleep 1
done
podman logs "$worker" 2>&1 | tail -12 | cut -c1-300
[ -n "$started" ] || { echo "compose: the worker did not log 'sandbox ready' within 120 s"; exit 1; }
echo "worker restarts: $(podman inspect --format '{{.RestartCount}}' "$worker")"

step "compose: open sign-up off (HOST 0.0.0.0), the first key from the admin CLI"
json() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s);const r=new Function("v","return "+process.argv[1])(v);console.log(typeof r==="string"?r:JSON.stringify(r))})' "$1"; }
api() { # method path [body]
  curl -sS -X "$1" -H "X-API-Key: ${key:-}" -H 'content-type: application/json' \
    ${3:+-d "$3"} "http://127.0.0.1:$cport$2"
}
# The web listens on 0.0.0.0 in its container and .env leaves OPEN_SIGNUP unset: closed.
signup=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
  -d '{"name":"stranger"}' "http://127.0.0.1:$cport/keys/generate")
echo "POST /keys/generate without a key: $signup (403 expected)"
[ "$signup" = 403 ] || { echo "compose: open sign-up is on by default"; exit 1; }
created=$(podman exec "$web" node dist/cli/admin.js accounts create compose-check --json)
key=$(echo "$created" | json v.key)
echo "key: ${key:0:12}… (id $(echo "$created" | json v.id))"
echo "status: $(api GET /status | cut -c1-600)"
show podman exec "$web" node dist/cli/admin.js accounts list

step "compose: a plain-git task, taken by the worker from the queue (Agenda)"
# A bare repository on the shared data volume, made as the foreman user in the worker.
show podman exec "$worker" sh -c 'set -e; rm -rf /data/check && mkdir -p /data/check && cd /data/check &&
  git init -q -b main src && cd src && printf "# app\n" > README.md && git add README.md &&
  git -c user.name=check -c user.email=check@example.invalid commit -q -m init &&
  git clone -q --bare . /data/check/app.git && echo "repository: /data/check/app.git"'
ws=$(api POST /workspaces '{"name":"compose-check","repos":[{"name":"acme/app","clone_url":"/data/check/app.git"}]}')
ws_id=$(echo "$ws" | json v.id) repo_id=$(echo "$ws" | json 'v.repos[0].id')
echo "workspace: $ws_id repo: $repo_id"
task=$(api POST /tasks "{\"workspace_id\":\"$ws_id\",\"repo_id\":\"$repo_id\",\"description\":\"Add a line to README.md\"}")
task_id=$(echo "$task" | json v.id)
echo "task: $task_id $(echo "$task" | json '[v.status, v.phase]')"
# Without a model (.env.example sets none) the pipeline runs clone and index in the worker,
# then stops at planning with "No model is configured": the task ends failed, by the worker.
moved="" ended=""
for _ in $(seq 1 180); do
  now=$(api GET "/tasks/$task_id" | json '[v.status, v.phase, v.error]')
  [[ "$now" == *'"QUEUED"'* ]] || moved=1
  if [[ "$now" == '["failed"'* || "$now" == '["completed"'* || "$now" == '["cancelled"'* ]]; then ended=1; break; fi
  sleep 1
done
echo "task now: $now"
echo "the worker's log for it:"
podman logs "$worker" 2>&1 | grep -F "$task_id" | node -e '
  require("readline").createInterface({ input: process.stdin }).on("line", (l) => {
    try { const e = JSON.parse(l); console.log(`  ${e.time} ${e.stage ?? ""} ${e.msg}${e.ms ? ` (${e.ms} ms)` : ""}${e.err ? `: ${e.err.message}` : ""}`.slice(0, 300)); } catch { console.log(l.slice(0, 300)); }
  });'
[ -n "$moved" ] || { echo "compose: the worker did not take the task within 180 s"; exit 1; }
[ -n "$ended" ] || echo "(the task had not ended after 180 s)"

step "compose: bubblewrap inside the worker, with compose.yaml's security options"
podman inspect --format 'security options: {{.HostConfig.SecurityOpt}}; user {{.Config.User}}' "$worker"
show podman exec "$worker" sh -c 'id; bwrap --version'
if podman exec "$worker" sh -c 'mkdir -p /tmp/wc && cd /app && node --input-type=module -e "
  const s = await import(\"/app/dist/sandbox/index.js\");
  s.configureSandbox({ engine: \"bwrap\", network: \"none\", hiddenPaths: [\"/data\"] });
  const r = await s.runSandboxed(\"echo inside: uid \$(id -u), cwd \$(pwd); ls /data 2>&1 | head -1; (getent hosts mongodb || echo no network) | head -1\", { cwd: \"/tmp/wc\", timeoutMs: 60000 });
  console.log(r.output.trim()); process.exit(r.ok ? 0 : 1);
"'; then
  echo "worker sandbox: ok"
else
  echo "worker sandbox: FAILED (docs/operations.md, 'In a container')"
  exit 1
fi
show "${compose_cmd[@]}" ps
