import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { forgetSecret, registerSecret } from "../../src/util/redact.js";
import { describeResult, runSandboxed } from "../../src/util/sandbox.js";

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

  it("runs in cwd with a fresh HOME", async () => {
    await writeFile(path.join(dir, "marker.txt"), "here");
    const result = await runSandboxed('cat marker.txt; echo; echo "$HOME"; pwd', {
      cwd: dir,
      timeoutMs: 10_000,
    });
    const [marker, home, pwd] = result.output.trim().split("\n");
    expect(marker).toBe("here");
    expect(pwd).toBe(dir);
    expect(home).not.toBe(process.env.HOME);
    expect(home).not.toBe(path.dirname(dir));
  });

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
});
