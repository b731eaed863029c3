/*
 * The launcher: a small Node process that starts the service's short-lived child processes
 * on its behalf (util/launcher.ts says why). It runs what the service asks over the IPC
 * channel and answers with what the process printed and how it ended; it exits when the
 * service goes (the channel closes), and the detached commands it started (their own process
 * groups, which the service kills by pid) are reparented as they would be at the service's
 * exit.
 */
import { execFile, spawn } from "node:child_process";
import type { LauncherReply, LauncherRequest } from "./launcher.js";

const running = new Map<number, { kill(signal: NodeJS.Signals): boolean }>();

function send(reply: LauncherReply): void {
  // The service is gone when the channel is: nothing to answer.
  if (process.connected) process.send!(reply);
}

function exec(request: Extract<LauncherRequest, { op: "exec" }>): void {
  const child = execFile(
    request.file,
    request.args,
    {
      cwd: request.cwd,
      env: request.env,
      timeout: request.timeout,
      maxBuffer: request.maxBuffer,
      encoding: "utf8",
    },
    (error, stdout, stderr) => {
      running.delete(request.id);
      const failure = error as
        (Error & { code?: unknown; killed?: boolean; signal?: unknown }) | null;
      send({
        id: request.id,
        type: "done",
        stdout,
        stderr,
        error: failure
          ? {
              message: failure.message,
              code: (failure.code as number | string | null | undefined) ?? null,
              killed: failure.killed ?? false,
              signal: (failure.signal as NodeJS.Signals | null | undefined) ?? null,
            }
          : null,
      });
    },
  );
  running.set(request.id, child);
}

function start(request: Extract<LauncherRequest, { op: "spawn" }>): void {
  const child = spawn(request.file, request.args, {
    cwd: request.cwd,
    env: request.env,
    detached: true,
    stdio: "ignore",
  });
  child.once("spawn", () => send({ id: request.id, type: "spawned", pid: child.pid! }));
  child.once("error", (error: NodeJS.ErrnoException) => {
    // Only a failure to start is reported (the service kills the group itself, by pid).
    if (child.pid === undefined)
      send({ id: request.id, type: "failed", message: error.message, code: error.code ?? null });
  });
  child.once("exit", (code, signal) =>
    send({ id: request.id, type: "exit", code, signal: signal ?? null }),
  );
}

process.on("message", (request: LauncherRequest) => {
  if (request.op === "exec") exec(request);
  else if (request.op === "spawn") start(request);
  else running.get(request.id)?.kill(request.signal);
});
process.on("disconnect", () => process.exit(0));
send({ id: 0, type: "ready" });
