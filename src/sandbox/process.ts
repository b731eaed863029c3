import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, realpath } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { redactText } from "../util/redact.js";
import { onVolume } from "../workcopy/volume.js";
import { bwrapArgs, sandboxArgv } from "./bwrap.js";
import { removeTree } from "./cache.js";
import { buildEnv, sandboxPathVariable } from "./env.js";
import { publicNetwork } from "./network.js";
import { modulesOverlay, overlayTools, prepareOverlay, removeRunFolders } from "./overlays.js";
import { assertDirectory } from "./run.js";
import { CACHE_MOUNT, sandboxSettings, WORKSPACE } from "./settings.js";
import { killGroup } from "../util/launcher.js";

/*
 * A long-lived process in the task's sandbox with its stdin and stdout as pipes: an MCP
 * server over stdio (tools/mcp-tools.ts). The same boundary as run_command
 * (sandbox/run.ts): the working copy at /workspace, nothing else of the host's files, the
 * sandbox's network rule, a scrubbed environment. The whole process group is killed on close.
 */

const KILL_GRACE_MS = 2_000;
/**
 * A message (one line of JSON) longer than this ends the process: the SDK's reader keeps
 * growing one buffer and parses the line on the event loop (issue #40).
 */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Last bytes of stderr kept, for the log line of a server that fails. */
const STDERR_KEPT = 4 * 1024;

export interface SandboxProcessOptions {
  /** The working copy. */
  cwd: string;
  /** Variables for the process (secret-looking names are passed: they are its credentials). */
  env?: Record<string, string> | undefined;
}

/** An MCP transport over a sandboxed child's stdio. */
export class SandboxedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private run: string | undefined;
  /** The working copy's overlay scratch folders (beside it), removed with the run. */
  private scratch: string[] = [];
  private readonly buffer = new ReadBuffer();
  /** Bytes read since the last newline: the message being read so far. */
  private unread = 0;
  /** Why the transport stopped the process itself, for the failure's log line. */
  failure: string | undefined;
  private stderrTail = "";
  private closed = false;

  constructor(
    private readonly command: string[],
    private readonly options: SandboxProcessOptions,
  ) {}

  /** What the process wrote to stderr last (redacted), for a failure's log line. */
  get stderr(): string {
    return redactText(this.stderrTail.trim());
  }

  async start(): Promise<void> {
    this.run = await mkdtemp(path.join(os.tmpdir(), "foreman-mcp-"));
    // Names like API_KEY are the server's own credentials here: sandbox/env.ts drops secret-looking
    // names from `env`, so they are set on the process's environment after the scrub.
    const { argv, env, cwd, scratch } = await sandboxedProcessArgv(this.command, {
      cwd: this.options.cwd,
      run: this.run,
    });
    this.scratch = scratch;
    const [file, ...args] = argv;
    if (!file) throw new Error("sandbox-process: empty command");
    const child = spawn(file, args, {
      cwd,
      env: { ...env, ...this.options.env },
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", reject);
    });
    child.on("error", (error) => this.onerror?.(error));
    child.on("close", () => void this.finish());
    child.stdin?.on("error", (error) => this.onerror?.(error));
    child.stdout?.on("data", (chunk: Buffer) => {
      const newline = chunk.lastIndexOf(0x0a);
      this.unread = newline === -1 ? this.unread + chunk.length : chunk.length - newline - 1;
      if (this.unread > MAX_MESSAGE_BYTES) {
        this.failure = `it wrote a message longer than ${MAX_MESSAGE_BYTES >> 20} MiB (limit)`;
        this.onerror?.(new Error(this.failure));
        child.stdout?.removeAllListeners("data");
        void this.close();
        return;
      }
      this.buffer.append(chunk);
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.buffer.readMessage();
        } catch (error) {
          this.onerror?.(error as Error);
          continue;
        }
        if (!message) break;
        this.onmessage?.(message);
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-STDERR_KEPT);
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.closed) return Promise.reject(new Error("The MCP server has exited."));
    return new Promise((resolve, reject) => {
      stdin.write(serializeMessage(message), (error) => (error ? reject(error) : resolve()));
    });
  }

  async close(): Promise<void> {
    const child = this.child;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const pid = child.pid;
      const gone = new Promise<void>((resolve) => child.once("close", () => resolve()));
      child.stdin?.end();
      killGroup(pid, "SIGTERM");
      const timer = setTimeout(() => killGroup(pid, "SIGKILL"), KILL_GRACE_MS);
      await gone;
      clearTimeout(timer);
    }
    await this.finish();
  }

  private async finish(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    if (this.run) await removeRunFolders(this.run, this.scratch);
    else for (const dir of this.scratch) await removeTree(dir).catch(() => undefined);
    this.onclose?.();
  }
}

/**
 * The argv and environment of a long-lived sandboxed process (sandbox/process.ts, an MCP
 * server of a task): the mounts, limits and network rule of runSandboxed, the working copy
 * bound at /workspace (no overlay and no disk watch: the process lives for one stage). `run`
 * is a folder of the caller's own, removed by it: its tmp/ is the process's /tmp and HOME.
 */
export async function sandboxedProcessArgv(
  command: string[],
  options: { cwd: string; run: string; env?: Record<string, string> | undefined },
): Promise<{ argv: string[]; env: NodeJS.ProcessEnv; cwd: string; scratch: string[] }> {
  await assertDirectory(options.cwd);
  const cwd = await realpath(options.cwd);
  const cache = path.join(options.run, "cache");
  await mkdir(cache, { recursive: true });
  if (sandboxSettings().engine !== "bwrap") {
    const home = path.join(options.run, "home");
    await mkdir(home, { recursive: true });
    return { argv: command, env: buildEnv(home, cache, options.env), cwd, scratch: [] };
  }
  const tmp = path.join(options.run, "tmp");
  await mkdir(path.join(tmp, "home"), { recursive: true });
  const diskLimitMb = sandboxSettings().diskLimitMb;
  const net = sandboxSettings().network === "public" ? await publicNetwork(options.run) : undefined;
  // Overlays as for runSandboxed, so no host path shows in the process's mountinfo; the
  // working copy's scratch folder (beside it) is the caller's to remove with `run`.
  const tools = await overlayTools();
  const overlays: string[] = [];
  const scratch: string[] = [];
  const mountSource = async (name: string, folder: string): Promise<string> => {
    if (!tools || (name === "ws" && onVolume(folder))) return folder;
    const made = await prepareOverlay(options.run, name, folder);
    if (!made) return folder;
    scratch.push(made);
    overlays.push(name);
    return path.join(options.run, name);
  };
  const bwrap = await bwrapArgs(
    {
      workspace: await mountSource("ws", cwd),
      hostWorkspace: cwd,
      workspaceAt: WORKSPACE,
      tmp: await mountSource("t", tmp),
      cache: { source: await mountSource("c", cache), readOnly: false },
      modules: await modulesOverlay(options.run, tools, overlays),
      diskLimitMb,
    },
    net?.bwrapOptions,
  );
  const argv = await sandboxArgv({
    run: options.run,
    bwrap,
    command,
    overlays,
    tools,
    net,
    diskLimitMb,
  });
  const env = buildEnv("/tmp/home", CACHE_MOUNT, options.env);
  env.TMPDIR = "/tmp";
  env.PATH = sandboxPathVariable(env.PATH ?? "");
  return { argv, env, cwd, scratch };
}
