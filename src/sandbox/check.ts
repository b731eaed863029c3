/*
 * The start-up check that the configured sandbox works here (checkSandbox), and the disk
 * budget's mechanism in words.
 */
import { mkdir, mkdtemp, readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { execFileAsync } from "../util/launcher.js";
import { volumeSupport } from "../workcopy/volume.js";
import { bwrapArgs, sandboxArgv } from "./bwrap.js";
import { removeTree } from "./cache.js";
import { bwrapFix, HOST_BWRAP_FIX } from "./container.js";
import { DISK_WATCH_MAX_INTERVAL_MS, DISK_WATCH_MIN_INTERVAL_MS } from "./disk.js";
import { findOnPath } from "./layout.js";
import { fileLimitMb, shmLimitMb } from "./limits.js";
import { NETWORK_FAILED_EXIT, NETWORK_FIX, networkTools, publicNetwork } from "./network.js";
import { overlayTools, prepareOverlay } from "./overlays.js";
import { sandboxSettings, WORKSPACE } from "./settings.js";
import { proxyBinary } from "./setup-proxy.js";

/** What the start-up check found, for the service's log (checkSandbox). */
export interface SandboxReport {
  /** How the working copy reaches /workspace. */
  workspaceMount: "overlay" | "bind" | "host";
  /** How TASK_DISK_LIMIT_MB is enforced, in words. */
  diskBudget: string;
}

/** The disk budget's mechanism, in words (logged at start, docs/operations.md). */
export function diskBudgetMechanism(): string {
  if (sandboxSettings().diskLimitMb <= 0) return "off (TASK_DISK_LIMIT_MB=0)";
  return (
    `TASK_DISK_LIMIT_MB=${sandboxSettings().diskLimitMb}: a watcher measures each run's working copy, ` +
    `temporary files and package cache with du every ${DISK_WATCH_MIN_INTERVAL_MS / 1000}-` +
    `${DISK_WATCH_MAX_INTERVAL_MS / 1000} s (and open deleted files) and stops the command past ` +
    `the budget; the kernel caps single files at ${fileLimitMb(sandboxSettings().diskLimitMb)} MB (RLIMIT_FSIZE)` +
    (sandboxSettings().engine === "bwrap"
      ? ` and /dev/shm at ${shmLimitMb(sandboxSettings().diskLimitMb)} MB`
      : "")
  );
}

/**
 * Start-up check that the configured engine works here: runs `true` in the same sandbox as
 * a real command (same mounts and limits). Throws an error naming the fix; says how the
 * working copy is mounted and how the disk budget is kept.
 */
export async function checkSandbox(options: { setupProxy?: boolean } = {}): Promise<SandboxReport> {
  const volumes = await volumeSupport();
  const diskBudget =
    sandboxSettings().diskLimitMb > 0
      ? `${diskBudgetMechanism()}; ${
          volumes.available
            ? `the kernel caps each working copy at ${sandboxSettings().diskLimitMb} MB (a loop-mounted ext4 volume per task, TASK_DISK_VOLUMES=auto)`
            : `no volume per working copy (${volumes.reason})`
        }`
      : diskBudgetMechanism();
  if (options.setupProxy) {
    // The setup step's allowlist needs its proxy, and (sandboxed) the user-mode network.
    await proxyBinary();
    if (sandboxSettings().engine === "bwrap")
      await networkTools().catch((error: Error) => {
        throw new Error(
          `${error.message.replace("SANDBOX_NETWORK=public", "The setup step (SANDBOX_SETUP_ALLOW)")} Or set SANDBOX_SETUP_ALLOW to an empty value.`,
        );
      });
  }
  if (sandboxSettings().engine === "none") return { workspaceMount: "host", diskBudget };
  if (!(await findOnPath("bwrap"))) {
    // Installing it is the fix on a host and in an image alike: the host's words.
    throw new Error(`SANDBOX=bwrap but bwrap is not on the PATH: ${HOST_BWRAP_FIX}.`);
  }
  if (!(await findOnPath("prlimit"))) {
    throw new Error(
      "SANDBOX=bwrap needs prlimit for its limits: install util-linux (`apt-get install util-linux`).",
    );
  }
  const publicNet = sandboxSettings().network === "public";
  if (publicNet) await networkTools(); // names the packages to install
  const probe = await mkdtemp(path.join(os.tmpdir(), "foreman-probe-"));
  try {
    const workspace = path.join(probe, "workspace");
    const tmp = path.join(probe, "tmp");
    await mkdir(workspace);
    await mkdir(tmp);
    const tools = await overlayTools();
    const overlays: string[] = [];
    let source = workspace;
    if (tools && (await prepareOverlay(probe, "ws", workspace))) {
      overlays.push("ws");
      source = path.join(probe, "ws");
    }
    const net = publicNet ? await publicNetwork(probe) : undefined;
    const args = await sandboxArgv({
      run: probe,
      bwrap: await bwrapArgs(
        {
          workspace: source,
          hostWorkspace: workspace,
          workspaceAt: WORKSPACE,
          tmp,
          diskLimitMb: sandboxSettings().diskLimitMb,
        },
        net?.bwrapOptions,
      ),
      command: ["/bin/sh", "-c", "true"],
      overlays,
      tools,
      net,
      diskLimitMb: sandboxSettings().diskLimitMb,
    });
    await execFileAsync(args[0]!, args.slice(1), {
      timeout: 15_000,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    const mode = overlays.length
      ? (await readFile(path.join(probe, "ws.mode"), "utf8").catch(() => "overlay")).trim()
      : "bind";
    return { workspaceMount: mode === "overlay" ? "overlay" : "bind", diskBudget };
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: string };
    const detail = (failure.stderr ?? "").trim().split("\n")[0] || failure.message;
    if (publicNet && (failure.code as unknown) === NETWORK_FAILED_EXIT)
      throw new Error(
        `SANDBOX_NETWORK=public does not work on this machine (${(failure.stderr ?? "").trim().replace(/\s+/g, " ")}): ${NETWORK_FIX}, or set SANDBOX_NETWORK=none.`,
      );
    // In a container, the container's options (sandbox/container.ts), not the host's packages.
    throw new Error(`SANDBOX=bwrap does not work on this machine (${detail}): ${bwrapFix()}.`);
  } finally {
    await removeTree(probe);
  }
}
