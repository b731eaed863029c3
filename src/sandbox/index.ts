/*
 * The sandbox: the one way the service runs a repository's own commands (run.ts says how,
 * and why it is a security boundary). Importers outside src/sandbox/ use this module; the
 * package caches (cache.ts), the disk budget (disk.ts), the setup proxy (setup-proxy.ts),
 * the task's time budget (command-time.ts) and long-lived processes (process.ts) are
 * imported from their own modules.
 */
export { DiskBudgetError } from "./disk.js";
export type { SandboxCache } from "./cache.js";
export {
  BUILD_CACHE_MOUNT,
  CACHE_MOUNT,
  configureSandbox,
  SERVICE_MODULES_MOUNT,
  sandboxSettings,
  VENV_DIR,
  WORKSPACE,
  type SandboxEngine,
  type SandboxOptions,
  type SandboxResult,
  type SandboxSettings,
  type SandboxTimeBudget,
} from "./settings.js";
export { checkSandbox, diskBudgetMechanism, type SandboxReport } from "./check.js";
export { sandboxPath, sandboxRoot } from "./env.js";
export { describeResult, heartbeatLine } from "./output.js";
export { diskBudgetFailure } from "./limits.js";
export { groupExists, runSandboxed } from "./run.js";
