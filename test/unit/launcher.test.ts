import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  execFile,
  execFileAsync,
  launchDetached,
  stopLauncher,
  type ExecError,
} from "../../src/util/launcher.js";

/*
 * The launcher (util/launcher.ts): commands started by a small helper process behave as
 * child_process.execFile's and a detached spawn's do, and the helper is not the service's
 * child process.
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "launcher-"));
});
afterAll(async () => {
  await stopLauncher();
  await rm(dir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function parentOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

describe("the launcher", () => {
  it("runs a command with its arguments, folder and environment, and returns both streams", async () => {
    const { stdout, stderr } = await execFileAsync(
      "/bin/sh",
      ["-c", 'printf "%s|%s|%s" "$1" "$PWD" "$ONLY"; echo oops >&2', "sh", "a b"],
      { cwd: dir, env: { ONLY: "this", PATH: "/usr/bin:/bin" } },
    );
    expect(stdout).toBe(`a b|${dir}|this`);
    expect(stderr).toBe("oops\n");
  });

  it("is another process than the service, and the command is its child", async () => {
    const { stdout } = await execFileAsync("/bin/sh", ["-c", "echo $PPID"]);
    const launcherPid = Number(stdout.trim());
    expect(launcherPid).not.toBe(process.pid);
    expect(await parentOf(launcherPid)).toBe(process.pid);
  });

  it("fails as execFile does: exit code, stderr and stdout on the error", async () => {
    const error = (await execFileAsync("/bin/sh", ["-c", "echo out; echo bad >&2; exit 3"]).catch(
      (e: unknown) => e,
    )) as ExecError;
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe(3);
    expect(error.stdout).toBe("out\n");
    expect(error.stderr).toBe("bad\n");
    expect(error.message).toMatch(/Command failed/);

    const missing = (await execFileAsync("/no/such/program", []).catch(
      (e: unknown) => e,
    )) as ExecError;
    expect(missing.code).toBe("ENOENT");

    const callback = await new Promise<[ExecError | null, string]>((resolve) =>
      execFile("/bin/sh", ["-c", "echo x; exit 1"], {}, (e, out) => resolve([e, out])),
    );
    expect(callback[0]?.code).toBe(1);
    expect(callback[1]).toBe("x\n");
  });

  it("kills at the timeout and past maxBuffer, and on an abort", async () => {
    const slow = (await execFileAsync("sleep", ["30"], { timeout: 200 }).catch(
      (e: unknown) => e,
    )) as ExecError;
    expect(slow.killed).toBe(true);
    expect(slow.signal).toBe("SIGTERM");

    const big = (await execFileAsync("head", ["-c", "5000", "/dev/zero"], {
      maxBuffer: 1000,
    }).catch((e: unknown) => e)) as ExecError;
    expect(String(big.code)).toMatch(/MAXBUFFER/);

    const controller = new AbortController();
    const marker = path.join(dir, "aborted");
    const started = execFileAsync("/bin/sh", ["-c", `echo $$ > ${marker}; exec sleep 30`], {
      signal: controller.signal,
    });
    let pid = 0;
    for (let i = 0; i < 100 && !pid; i++) {
      pid = Number((await readFile(marker, "utf8").catch(() => "")).trim());
      if (!pid) await new Promise((r) => setTimeout(r, 20));
    }
    controller.abort();
    await expect(started).rejects.toMatchObject({ name: "AbortError" });
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
    expect(alive(pid)).toBe(false);
  });

  it("starts a detached command in a process group of its own and reports how it ended", async () => {
    const done = await launchDetached("/bin/sh", ["-c", "exit 7"], { env: process.env });
    expect(await done.exited).toEqual({ code: 7, signal: null });

    const long = await launchDetached("/bin/sh", ["-c", "sleep 30 & wait"], { env: process.env });
    expect(long.pid).toBeGreaterThan(0);
    // Its own group: the caller stops it, children included, by the group's pid.
    process.kill(-long.pid, "SIGKILL");
    expect(await long.exited).toEqual({ code: null, signal: "SIGKILL" });

    await expect(
      launchDetached("/no/such/program", [], { env: process.env }),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("starts again after it died; a detached command it followed is stopped with it", async () => {
    const first = Number((await execFileAsync("/bin/sh", ["-c", "echo $PPID"])).stdout);
    const follower = await launchDetached("sleep", ["30"], { env: process.env });
    process.kill(first, "SIGKILL");
    expect(await follower.exited).toEqual({ code: null, signal: "SIGKILL" });
    // Reaped by whoever adopted it, a moment later.
    for (let i = 0; i < 150 && alive(follower.pid); i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(alive(follower.pid)).toBe(false);
    const second = Number((await execFileAsync("/bin/sh", ["-c", "echo $PPID"])).stdout);
    expect(second).not.toBe(first);
    expect(alive(second)).toBe(true);
  });

  it("ends when the process that started it ends", async () => {
    // A Node process using the launcher, killed with SIGKILL (no chance to clean up).
    const script = `
      const { execFileAsync } = await import(${JSON.stringify(new URL("../../src/util/launcher.ts", import.meta.url).href)});
      const { stdout } = await execFileAsync("/bin/sh", ["-c", "echo $PPID"]);
      console.log(stdout.trim());
      setInterval(() => {}, 1000);
    `;
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const launcherPid = await new Promise<number>((resolve) =>
      child.stdout.once("data", (chunk: Buffer) => resolve(Number(String(chunk).trim()))),
    );
    expect(alive(launcherPid)).toBe(true);
    child.kill("SIGKILL");
    for (let i = 0; i < 150 && alive(launcherPid); i++) await new Promise((r) => setTimeout(r, 20));
    expect(alive(launcherPid)).toBe(false);
  }, 20_000);
});
