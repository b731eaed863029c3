import { readFileSync } from "node:fs";

/**
 * The mount points at or under `dir`, in the order they were mounted (this process shares the
 * host's mount namespace, and the service's in tests).
 */
export function mountsUnder(dir: string): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((target) => target === dir || target.startsWith(`${dir}/`));
}
