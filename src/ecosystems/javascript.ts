import { stat } from "node:fs/promises";
import path from "node:path";

/*
 * The JavaScript ecosystem's package managers: which lockfile names which manager, and how
 * each installs exactly what its lockfile pins. Verification (verify/checks.ts) installs
 * before running a repository's scripts and the health scan (health/coverage.ts) before
 * measuring coverage; both read this one table.
 */

export type PackageManager = "npm" | "pnpm" | "yarn" | "bun";

/** In precedence order: a stray package-lock.json next to pnpm-lock.yaml is the usual leftover. */
export const LOCKFILES: ReadonlyArray<readonly [string, PackageManager]> = [
  ["pnpm-lock.yaml", "pnpm"],
  ["yarn.lock", "yarn"],
  ["bun.lockb", "bun"],
  ["bun.lock", "bun"],
  ["package-lock.json", "npm"],
  ["npm-shrinkwrap.json", "npm"],
];

/** The frozen install of each manager (`short` is how the task log names it). */
export const INSTALL: Record<PackageManager, { command: string; short: string }> = {
  npm: { command: "npm ci --no-audit --no-fund", short: "npm ci" },
  pnpm: { command: "pnpm install --frozen-lockfile", short: "pnpm install" },
  yarn: { command: "yarn install --frozen-lockfile", short: "yarn install" },
  bun: { command: "bun install --frozen-lockfile", short: "bun install" },
};

/** Without a lockfile: npm resolves the declared ranges. */
export const UNLOCKED_INSTALL = "npm install --no-audit --no-fund";

/** The first lockfile present in `root` (a regular file) and its manager, or undefined. */
export async function findLockfile(
  root: string,
): Promise<{ lockfile: string; manager: PackageManager } | undefined> {
  for (const [lockfile, manager] of LOCKFILES) {
    const isFile = await stat(path.join(root, lockfile)).then(
      (info) => info.isFile(),
      () => false,
    );
    if (isFile) return { lockfile, manager };
  }
  return undefined;
}
