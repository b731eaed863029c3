import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

/** The built entry point (`npm run build`); the crash tests build it when it is missing. */
export const WORKER_MAIN = path.resolve(import.meta.dirname, "../../dist/main.js");

/**
 * Starts `foreman worker` as a process of its own (killed by the crash tests), with what
 * every such worker needs (local repositories allowed, the model without streaming, short
 * job locks and polls) and `env` on top: the database, DATA_DIR, the model.
 */
export function spawnWorker(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [WORKER_MAIN, "worker"], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // The tests clone local repositories (the clone URL policy refuses them otherwise).
      ALLOW_LOCAL_REPOS: "true",
      LOG_LEVEL: "warn",
      LLM_STREAM: "false",
      JOB_LOCK_LIFETIME_S: "2",
      TASK_POLL_MS: "200",
      // Plain folders, as in testConfig (test/helpers/server.ts): a killed worker's DATA_DIR
      // must stay removable.
      TASK_DISK_VOLUMES: "off",
      ...env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
}
