import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * The container this process runs in, if it can tell: Docker writes /.dockerenv, podman
 * /run/.containerenv (and sets `container`), Kubernetes sets KUBERNETES_SERVICE_HOST, and
 * under cgroup v1 PID 1's cgroup names the runtime. Undefined on a host (or where none of
 * these shows). `root` and `env` are for tests.
 */
export function containerRuntime(
  root = "/",
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  if (env.KUBERNETES_SERVICE_HOST) return "kubernetes";
  if (existsSync(path.join(root, "run", ".containerenv"))) return "podman";
  if (existsSync(path.join(root, ".dockerenv"))) return "docker";
  if (env.container) return env.container;
  let cgroup = "";
  try {
    cgroup = readFileSync(path.join(root, "proc", "1", "cgroup"), "utf8");
  } catch {
    return undefined;
  }
  const match = /\/(docker|kubepods|libpod|containerd|lxc)[/.-]/.exec(cgroup);
  return match ? (match[1] === "kubepods" ? "kubernetes" : match[1]) : undefined;
}

const TRUSTED = "or set SANDBOX=none with OPEN_SIGNUP=false if every repository is trusted";

/** What to do on a host when bubblewrap is missing or cannot make its namespaces. */
export const HOST_BWRAP_FIX =
  "install bubblewrap (`apt-get install bubblewrap`) and allow unprivileged user namespaces " +
  "(`sysctl -w kernel.unprivileged_userns_clone=1` on Debian, " +
  "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu 24.04+, " +
  "`sysctl -w user.max_user_namespaces=15000` where it is 0), " +
  TRUSTED;

/**
 * What to do when bubblewrap cannot make its namespaces: on a host, the packages and the
 * kernel settings; in a container (`runtime`, containerRuntime's answer), the container's
 * options (its runtime's defaults refuse the namespaces, the mounts and a fresh /proc), and
 * where the docs are.
 */
export function bwrapFix(runtime: string | undefined = containerRuntime()): string {
  if (runtime === undefined) return HOST_BWRAP_FIX;
  return (
    `this process runs in a container (${runtime}), whose defaults stop bubblewrap: start it with ` +
    "`--security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined` " +
    "(podman: `unmask=ALL` in place of `systempaths=unconfined`; compose.yaml's worker has them; " +
    "Kubernetes: the securityContext of deploy/kubernetes/foreman.yaml), on a host that allows " +
    'unprivileged user namespaces; docs/operations.md, "In a container: bubblewrap", has the table; ' +
    TRUSTED
  );
}
