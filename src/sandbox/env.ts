/*
 * A sandboxed command's environment: built from scratch, secrets never passed, PATH without
 * what the command must not see (run.ts).
 */
import { lstat } from "node:fs/promises";
import path from "node:path";
import { hiddenPaths, rustupHome } from "./layout.js";
import {
  isInside,
  sandboxSettings,
  SERVICE_MODULES_MOUNT,
  SERVICE_ROOT,
  VENV_DIR,
  WORKSPACE,
} from "./settings.js";

/*
 * Names never passed to the child, even from `options.env`: the service's own configuration
 * (model keys, GitHub App credentials, database URI, webhook secret) and anything named like
 * a credential. Matched case-insensitively; over-blocking a harmless `MONKEY` is the price.
 */
const BLOCKED_ENV =
  /^(LLM_|ANTHROPIC_|OPENAI_|GITHUB|APP_ID$|PRIVATE_KEY$|WEBHOOK_SECRET$|MONGODB_URI$)|TOKEN|SECRET|KEY|PASSWORD/i;

/** True when a variable of this name may never reach a sandboxed command. */
function isBlockedEnvName(name: string): boolean {
  return BLOCKED_ENV.test(name);
}

/** The variables that send a setup run's downloads through the setup proxy. */
export function proxyEnv(host: string, port: number): Record<string, string> {
  const url = `http://${host}:${port}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    // What is in the cache is used as it is: a second install of the same lockfile asks
    // the registry nothing.
    npm_config_prefer_offline: "true",
    CARGO_HTTP_PROXY: url,
  };
}

/**
 * PATH as a sandboxed command gets it: without the folders it cannot see or must not learn of
 * (the service's checkout, whose node_modules/.bin npm put first, hidden paths such as
 * DATA_DIR, and any other package's node_modules/.bin of the service's own run); a folder
 * under /workspace a caller put there (the repository's node_modules/.bin) stays.
 */
export function sandboxPathVariable(value: string): string {
  const hidden = hiddenPaths();
  return (
    value
      .split(":")
      .filter((dir) => dir !== "" && path.isAbsolute(dir))
      .filter((dir) => !hidden.some((h) => dir === h || isInside(dir, h)))
      // A caller's own (the working copy's /workspace/node_modules/.bin) stays.
      .filter((dir) => isInside(dir, WORKSPACE) || !/(^|\/)node_modules\/\.bin\/?$/.test(dir))
      .filter((dir, i, all) => all.indexOf(dir) === i)
      .join(":")
  );
}

/** Where the sandbox's variables point: HOME, and the package cache's folder. */
export function buildEnv(
  home: string,
  cache: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    LANG: "C.UTF-8",
    TERM: "dumb",
    CI: "true",
    NO_COLOR: "1",
    npm_config_update_notifier: "false",
    npm_config_cache: path.join(cache, "npm"),
    GOCACHE: path.join(cache, "go-build"),
    GOPATH: path.join(cache, "go"),
    XDG_CACHE_HOME: path.join(cache, "xdg"), // yarn and most others follow XDG
    PIP_CACHE_DIR: path.join(cache, "pip"),
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    PIP_NO_INPUT: "1",
    PIP_PROGRESS_BAR: "off",
    // No bytecode of the working copy's own modules is written, so none can go stale: CPython
    // trusts a .pyc whose source has the same size and mtime second, and a fix written within
    // the second of the run that compiled the wrong version (`a * b` then `a + b`) ran the
    // wrong one. Installed packages keep the bytecode pip compiled for them.
    PYTHONDONTWRITEBYTECODE: "1",
  };
  // Where a toolchain's shims look for it (pyenv's shims need PYENV_ROOT once HOME moved).
  for (const name of ["PYENV_ROOT", "GOROOT", "RUSTUP_HOME"]) {
    const value = process.env[name];
    if (value) env[name] = value;
  }
  env.RUSTUP_HOME ??= rustupHome();
  env.CARGO_HOME = path.join(cache, "cargo"); // registry downloads; ~/.cargo stays read-only
  // Callers may override the defaults above (a different PATH, CI=false) but never pass a
  // secret-looking name: those are dropped silently, because the service's own credentials
  // must not cross into repository code whatever a caller or configuration asks.
  for (const [name, value] of Object.entries(extra)) {
    if (!isBlockedEnvName(name)) env[name] = value;
  }
  return env;
}

/** True when the working copy holds a virtual environment (a real folder with pyvenv.cfg). */
export async function hasVenv(cwd: string): Promise<boolean> {
  const dir = await lstat(path.join(cwd, VENV_DIR)).catch(() => undefined);
  if (!dir?.isDirectory()) return false;
  const cfg = await lstat(path.join(cwd, VENV_DIR, "pyvenv.cfg")).catch(() => undefined);
  return cfg?.isFile() === true;
}

/**
 * The path a sandboxed command sees for a host path the service hands it: a file of the
 * service's own node_modules (serviceC8) is under SERVICE_MODULES_MOUNT. Unchanged with
 * SANDBOX=none.
 */
export function sandboxPath(hostPath: string): string {
  if (sandboxSettings().engine === "none") return hostPath;
  const modules = path.join(SERVICE_ROOT, "node_modules");
  if (isInside(hostPath, modules))
    return path.posix.join(SERVICE_MODULES_MOUNT, path.relative(modules, hostPath));
  return hostPath;
}

/** The working copy's path as sandboxed commands see it: /workspace, or `root` (SANDBOX=none). */
export function sandboxRoot(root: string): string {
  return sandboxSettings().engine === "none" ? root : WORKSPACE;
}
