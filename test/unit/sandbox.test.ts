// test-matrix: runtime-sensitive: the sandbox runs repository code with this Node on PATH
// (its output through the FIFO, process.exit, leftovers killed).
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config/env.js";
import { forgetSecret, registerSecret } from "../../src/util/redact.js";
import {
  checkSandbox,
  configureSandbox,
  describeResult,
  runSandboxed,
} from "../../src/sandbox/index.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-sandbox-test-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/*
 * Whether a process still runs. A killed process whose parent died first waits as a zombie
 * until PID 1 reaps it, and some container inits never do: a zombie runs nothing, so it
 * counts as gone.
 */
async function isRunning(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw error;
  }
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state !== "Z" && state !== "X" && stat !== "";
}

async function waitUntilGone(pid: number, withinMs: number): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (Date.now() < until) {
    if (!(await isRunning(pid))) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return !(await isRunning(pid));
}

describe("runSandboxed", () => {
  it("reports exit codes and keeps both streams in the order written", async () => {
    const ok = await runSandboxed("echo out1; echo err1 >&2; echo out2; echo err2 >&2", {
      cwd: dir,
      timeoutMs: 10_000,
    });
    expect(ok).toMatchObject({ exitCode: 0, ok: true, timedOut: false, aborted: false });
    expect(ok.output).toBe("out1\nerr1\nout2\nerr2\n");

    const failed = await runSandboxed("echo nope >&2; exit 3", { cwd: dir, timeoutMs: 10_000 });
    expect(failed).toMatchObject({ exitCode: 3, signal: null, ok: false, output: "nope\n" });
    expect(describeResult(failed)).toMatch(
      /^`echo nope >&2; exit 3` failed with exit code 3 after /,
    );
  });

  it("keeps all the output of a Node program that prints a lot and calls process.exit", async () => {
    // On a socket (Node's "pipe" stdio) the queued end of this output would be lost.
    const result = await runSandboxed(
      `node -e "for (let i = 0; i < 3000; i++) console.log('line ' + i + ' ' + 'x'.repeat(10)); process.exit(1)"`,
      { cwd: dir, timeoutMs: 20_000, maxOutputBytes: 1024 * 1024 },
    );
    expect(result.exitCode).toBe(1);
    const lines = result.output.trimEnd().split("\n");
    expect(lines).toHaveLength(3000);
    expect(lines.at(-1)).toBe(`line 2999 ${"x".repeat(10)}`);
  });

  it("runs in the working copy, at /workspace, with a fresh HOME", async () => {
    await writeFile(path.join(dir, "marker.txt"), "here");
    const result = await runSandboxed('cat marker.txt; echo; echo "$HOME"; pwd', {
      cwd: dir,
      timeoutMs: 10_000,
    });
    const [marker, home, pwd] = result.output.trim().split("\n");
    expect(marker).toBe("here");
    expect(pwd).toBe("/workspace");
    expect(home).not.toBe(process.env.HOME);
    expect(home).not.toBe(path.dirname(dir));
  });

  it("stops when aborted while the sandbox is being set up", async () => {
    // An abort landing between the start's check and the command's spawn (folders, overlays,
    // bwrap's arguments) must not be lost: the command would run to its timeout.
    for (const delay of [0, 15, 40]) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), delay);
      const result = await runSandboxed("sleep 30", {
        cwd: dir,
        timeoutMs: 15_000,
        signal: controller.signal,
      });
      expect(result, `aborted after ${delay} ms`).toMatchObject({ aborted: true, ok: false });
      expect(result.durationMs).toBeLessThan(5_000);
    }
  });

  it("stops when aborted", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const result = await runSandboxed("sleep 30", {
      cwd: dir,
      timeoutMs: 20_000,
      signal: controller.signal,
    });
    expect(result).toMatchObject({ aborted: true, timedOut: false, ok: false });
    expect(result.durationMs).toBeLessThan(5_000);
    expect(describeResult(result)).toMatch(/^`sleep 30` was cancelled after/);

    const before = await runSandboxed("touch ran", {
      cwd: dir,
      timeoutMs: 10_000,
      signal: AbortSignal.abort(),
    });
    expect(before.aborted).toBe(true);
    await expect(readFile(path.join(dir, "ran"))).rejects.toThrow(/ENOENT/);
  });

  describe("engine none (operator opt-out)", () => {
    beforeAll(() => configureSandbox({ engine: "none" }));
    afterAll(() => configureSandbox({}));

    it("kills the whole process group at the timeout", async () => {
      const started = Date.now();
      const result = await runSandboxed("sleep 30 & echo $! > pid; wait", {
        cwd: dir,
        timeoutMs: 500,
      });
      expect(result.timedOut).toBe(true);
      expect(result.ok).toBe(false);
      expect(result.exitCode).toBeNull();
      expect(result.signal).toBe("SIGTERM");
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(describeResult(result)).toMatch(/timed out after/);

      const pid = Number((await readFile(path.join(dir, "pid"), "utf8")).trim());
      expect(pid).toBeGreaterThan(0);
      expect(await waitUntilGone(pid, 2_000)).toBe(true);
    });

    it("escalates to SIGKILL when SIGTERM is ignored", async () => {
      const result = await runSandboxed("trap '' TERM; while :; do sleep 0.1; done", {
        cwd: dir,
        timeoutMs: 300,
      });
      expect(result.timedOut).toBe(true);
      expect(result.signal).toBe("SIGKILL");
      expect(result.durationMs).toBeGreaterThanOrEqual(2_000);
      expect(result.durationMs).toBeLessThan(6_000);
    });

    it("does not wait for background processes once the shell has exited", async () => {
      const result = await runSandboxed("sleep 30 & echo $! > pid; echo started", {
        cwd: dir,
        timeoutMs: 20_000,
      });
      expect(result).toMatchObject({ ok: true, exitCode: 0, output: "started\n" });
      expect(result.durationMs).toBeLessThan(5_000);
      const pid = Number((await readFile(path.join(dir, "pid"), "utf8")).trim());
      expect(await waitUntilGone(pid, 2_000)).toBe(true);
    });
  });

  describe("environment", () => {
    const planted = {
      LLM_API_KEY: "llm-key-value-8f3a",
      GITHUB_TOKEN: "github-token-value-71bc",
      MONGODB_URI: "mongodb://user:mongo-pass-5d2e@db:27017/foreman",
      WEBHOOK_SECRET: "webhook-secret-value-c09d",
    };
    const saved: Record<string, string | undefined> = {};

    beforeEach(() => {
      for (const [name, value] of Object.entries(planted)) {
        saved[name] = process.env[name];
        process.env[name] = value;
      }
    });

    afterEach(() => {
      for (const name of Object.keys(planted)) {
        const value = saved[name];
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    });

    it("keeps the service's secrets from the command", async () => {
      const result = await runSandboxed("env", {
        cwd: dir,
        timeoutMs: 10_000,
        env: { MY_TOKEN: "x-token-value", FOO: "bar", GITHUB_APP_ID: "1", openai_api_key: "k" },
      });
      expect(result.ok).toBe(true);
      for (const [name, value] of Object.entries(planted)) {
        expect(result.output).not.toContain(name);
        expect(result.output).not.toContain(value);
      }
      expect(result.output).not.toMatch(/MY_TOKEN|x-token-value|GITHUB_APP_ID|openai_api_key/);
      expect(result.output).toMatch(/^FOO=bar$/m);
      expect(result.output).toMatch(/^CI=true$/m);
      expect(result.output).toMatch(/^NO_COLOR=1$/m);
      expect(result.output).toMatch(/^npm_config_cache=\//m);
    });
  });

  describe("output", () => {
    it("keeps the head and the tail of long output", async () => {
      const result = await runSandboxed(
        "echo HEAD-START; yes filler-line | head -c 200000; echo; echo TAIL-END",
        { cwd: dir, timeoutMs: 10_000, maxOutputBytes: 4096 },
      );
      expect(result.ok).toBe(true);
      expect(result.output.startsWith("HEAD-START\n")).toBe(true);
      expect(result.output.endsWith("\nTAIL-END\n")).toBe(true);
      const marker = /\n\[… (\d+) bytes omitted …\]\n/.exec(result.output);
      expect(marker).not.toBeNull();
      const total = "HEAD-START\n".length + 200_000 + "\nTAIL-END\n".length;
      expect(Number(marker?.[1])).toBe(total - 4096);
      const [head = "", tail = ""] = result.output.split(marker?.[0] ?? "");
      expect(Buffer.byteLength(head)).toBe(1024);
      expect(Buffer.byteLength(tail)).toBe(3072);
    });

    it("redacts registered secrets, also where one crosses a cut", async () => {
      const whole = "sandbox-secret-whole-9d1f";
      const crossing = "Zq9x-crossing-secret-value";
      registerSecret(whole);
      registerSecret(crossing);
      try {
        const plain = await runSandboxed(`echo "token=${whole}"`, { cwd: dir, timeoutMs: 10_000 });
        expect(plain.output).toBe("token=[REDACTED]\n");

        // The second secret starts 10 bytes before the head cut at 1024 and ends after it.
        const cut = await runSandboxed(
          `printf '%1014s' ''; printf '${crossing}'; yes filler | head -c 20000`,
          { cwd: dir, timeoutMs: 10_000, maxOutputBytes: 4096 },
        );
        expect(cut.output).toMatch(/bytes omitted/);
        expect(cut.output).not.toContain("Zq9x");
        expect(cut.output).not.toContain("crossing");
      } finally {
        forgetSecret(whole);
        forgetSecret(crossing);
      }
    });
  });

  it("refuses a working directory that does not exist", async () => {
    const missing = path.join(dir, "missing");
    await expect(runSandboxed("true", { cwd: missing, timeoutMs: 1_000 })).rejects.toThrow(
      `sandbox: working directory ${missing} is not accessible (ENOENT)`,
    );
    await writeFile(path.join(dir, "file"), "");
    await expect(
      runSandboxed("true", { cwd: path.join(dir, "file"), timeoutMs: 1_000 }),
    ).rejects.toThrow(/is not a directory/);
  });

  describe("bwrap boundary (the default engine)", () => {
    /** Host processes whose command line holds `token`: the sandbox's leftovers, if any. */
    async function hostProcesses(token: string): Promise<number[]> {
      const found: number[] = [];
      for (const entry of await readdir("/proc")) {
        if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
        const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
        if (cmdline.includes(token) && (await isRunning(Number(entry)))) found.push(Number(entry));
      }
      return found;
    }

    async function goneWithin(token: string, ms: number): Promise<boolean> {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        if ((await hostProcesses(token)).length === 0) return true;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return (await hostProcesses(token)).length === 0;
    }

    it("starts: the start-up probe passes on this machine", async () => {
      const report = await checkSandbox();
      expect(["overlay", "bind"]).toContain(report.workspaceMount);
      expect(report.diskBudget).toMatch(/^TASK_DISK_LIMIT_MB=2048: a watcher measures/);
    });

    it("names the fix when bwrap is missing", async () => {
      const saved = process.env.PATH;
      process.env.PATH = dir; // an empty folder: no bwrap on it
      try {
        await expect(checkSandbox()).rejects.toThrow(/apt-get install bubblewrap/);
      } finally {
        process.env.PATH = saved;
      }
    });

    it("kills what the command left behind when it exits, and at a timeout", async () => {
      const token = `leftover-${process.pid}-${Date.now()}`;
      const left = await runSandboxed(
        `sh -c 'sleep 300; : ${token}' & setsid sh -c 'sleep 300; : ${token}' & echo started`,
        {
          cwd: dir,
          timeoutMs: 20_000,
        },
      );
      expect(left).toMatchObject({ ok: true, output: "started\n" });
      expect(await goneWithin(token, 2_000)).toBe(true);

      const timed = await runSandboxed(
        `trap '' TERM; sh -c 'trap "" TERM; sleep 300; : ${token}' & while :; do sleep 0.1; done`,
        { cwd: dir, timeoutMs: 500 },
      );
      expect(timed.timedOut).toBe(true);
      expect(timed.durationMs).toBeLessThan(5_000);
      expect(await goneWithin(token, 2_000)).toBe(true);
    });

    it("shows the working copy and nothing else of the host", async () => {
      const wc = path.join(dir, "wc");
      await mkdir(path.join(wc, ".git", "hooks"), { recursive: true });
      await writeFile(path.join(dir, "sibling-secret"), "other account's file");
      await writeFile(path.join(wc, "mine.txt"), "mine");
      const outside = path.join(os.tmpdir(), `foreman-outside-${process.pid}-${Date.now()}`);
      const serviceRoot = process.cwd();
      const script = [
        "cat mine.txt && echo; echo changed > mine.txt && echo wrote-wc",
        `cat ${path.join(dir, "sibling-secret")} || echo no-sibling`,
        `ls ${serviceRoot}/package.json || echo no-service`,
        `touch ${outside}`, // lands in the private /tmp, if anywhere
        "echo hook > .git/hooks/post-commit || echo no-hook",
        "echo '[core] fsmonitor = x' >> .git/config || echo no-config",
        "ls /proc | grep -c '^[0-9]'",
        "cat /proc/1/environ | tr '\\0' '\\n' | grep -c LLM_API_KEY || true",
        'echo "home=$HOME"; touch "$HOME/x" /tmp/y && echo private-ok',
      ].join("\n");
      const result = await runSandboxed(script, { cwd: wc, timeoutMs: 10_000 });
      expect(result.output).toContain("mine\nwrote-wc");
      expect(await readFile(path.join(wc, "mine.txt"), "utf8")).toBe("changed\n");
      for (const refused of ["no-sibling", "no-service", "no-hook", "no-config"])
        expect(result.output).toContain(refused);
      expect(result.output).toContain("home=/tmp/home");
      expect(result.output).toContain("private-ok");
      await expect(stat(outside)).rejects.toThrow(/ENOENT/);
      await expect(stat(path.join(wc, ".git", "hooks", "post-commit"))).rejects.toThrow(/ENOENT/);
      // Only the sandbox's own processes (bwrap's init, the shell, ls, grep), and no
      // service environment in its /proc/1.
      const counts = /no-config\n(\d+)\n(\d+)\n/.exec(result.output);
      expect(Number(counts?.[1])).toBeLessThan(8);
      expect(counts?.[2]).toBe("0");
    });

    it("never reaches a listener on the host's loopback", async () => {
      const server = net.createServer((socket) => socket.end("hello from the host\n"));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as net.AddressInfo).port;
      try {
        const result = await runSandboxed(
          `node -e 'const s=require("net").connect(${port},"127.0.0.1");s.on("data",d=>{console.log("REACHED "+d);process.exit(0)});s.on("error",e=>{console.log("refused "+e.code);process.exit(0)})'`,
          { cwd: dir, timeoutMs: 10_000 },
        );
        expect(result.output).toMatch(/^refused (ECONNREFUSED|ENETUNREACH)/);
        expect(result.output).not.toContain("REACHED");
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it("says which limit ended a command", async () => {
      // 400 MB leaves a loaded machine's node room to start (its threads' malloc arenas count
      // against RLIMIT_DATA); the script then asks for 1 GB.
      configureSandbox({ memoryMb: 400, maxFileMb: 1, maxProcs: 20 });
      try {
        const memory = await runSandboxed(
          "node -e 'const a=[];for(let i=0;i<20;i++)a.push(Buffer.alloc(50e6,1))'",
          { cwd: dir, timeoutMs: 20_000 },
        );
        expect(memory.ok).toBe(false);
        expect(describeResult(memory), memory.output).toMatch(
          /failed with exit code \d+ after .* \(out of memory: the command exceeded SANDBOX_MEMORY_MB=400\)$/,
        );
        const big = await runSandboxed("head -c 2000000 /dev/zero > big", {
          cwd: dir,
          timeoutMs: 10_000,
        });
        expect(big.ok).toBe(false);
        expect(big.limit).toBe(
          "file too large: the command wrote a file over SANDBOX_MAX_FILE_MB=1",
        );
        const forks = await runSandboxed("for i in $(seq 1 60); do sleep 1 & done; wait", {
          cwd: dir,
          timeoutMs: 10_000,
        });
        expect(forks.ok).toBe(false);
        expect(describeResult(forks)).toMatch(
          /\(too many processes: the command exceeded SANDBOX_MAX_PROCS=20\)$/,
        );
      } finally {
        configureSandbox({});
      }
    });
  });
});

describe("sandbox configuration", () => {
  it("defaults to bubblewrap with no network and the documented limits", () => {
    expect(loadConfig({}).sandbox).toEqual({
      engine: "bwrap",
      network: "none",
      memoryMb: 4096,
      maxProcs: 1024,
      maxFileMb: 1024,
      diskLimitMb: 2048,
      diskVolumes: "auto",
      cacheMaxAgeDays: 14,
      cacheMaxMb: 10_240,
      setupAllow: [
        "registry.npmjs.org",
        "registry.yarnpkg.com",
        "pypi.org",
        "files.pythonhosted.org",
        "proxy.golang.org",
        "sum.golang.org",
        "crates.io",
        "index.crates.io",
        "static.crates.io",
        "rubygems.org",
        "index.rubygems.org",
      ],
      setupAllowAddresses: [],
      pipIndexUrl: null,
      heartbeatMs: 10_000,
    });
    expect(
      loadConfig({ PIP_INDEX_URL: "https://pypi.corp.example/simple/" }).sandbox,
    ).toMatchObject({ pipIndexUrl: "https://pypi.corp.example/simple/" });
    expect(loadConfig({}).dataDirMinFreeMb).toBe(1024);
    expect(
      loadConfig({ SANDBOX_MEMORY_MB: "512", SANDBOX_MAX_PROCS: "64", SANDBOX_MAX_FILE_MB: "8" })
        .sandbox,
    ).toMatchObject({ memoryMb: 512, maxProcs: 64, maxFileMb: 8 });
  });

  it("refuses SANDBOX=none while OPEN_SIGNUP is on, naming the fix", () => {
    for (const env of [{ SANDBOX: "none" }, { SANDBOX: "none", OPEN_SIGNUP: "true" }]) {
      let error: unknown;
      try {
        loadConfig(env);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.join("\n")).toMatch(
        /^SANDBOX: none .* refused while OPEN_SIGNUP is on: install bubblewrap \(apt-get install bubblewrap\) .* or set OPEN_SIGNUP=false$/m,
      );
    }
    expect(loadConfig({ SANDBOX: "none", OPEN_SIGNUP: "false" }).sandbox.engine).toBe("none");
  });

  it("rejects unknown engines, networks and limits", () => {
    expect(() => loadConfig({ SANDBOX: "docker" })).toThrow(/SANDBOX/);
    expect(() => loadConfig({ SANDBOX_NETWORK: "host" })).toThrow(/SANDBOX_NETWORK/);
    expect(() => loadConfig({ SANDBOX_MEMORY_MB: "0" })).toThrow(/SANDBOX_MEMORY_MB/);
    expect(() => loadConfig({ SANDBOX_MAX_PROCS: "lots" })).toThrow(/SANDBOX_MAX_PROCS/);
    expect(() => loadConfig({ SANDBOX_SETUP_ALLOW_ADDRESSES: "10.0.0.0/8,localhost" })).toThrow(
      /SANDBOX_SETUP_ALLOW_ADDRESSES.*"localhost" is not an address range/,
    );
    expect(
      loadConfig({ SANDBOX_SETUP_ALLOW_ADDRESSES: " 10.1.2.0/24, fd00::/8 ,192.168.1.5" }).sandbox
        .setupAllowAddresses,
    ).toEqual(["10.1.2.0/24", "fd00::/8", "192.168.1.5"]);
  });
});
