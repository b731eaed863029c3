import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm, unlink, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/*
 * `npm start`'s prestart (scripts/build-if-stale.mjs) builds only when dist/ is missing or a
 * build input changed. A small project in a temp folder whose `npm run build` counts its
 * runs, through the real npm.
 */

const run = promisify(execFile);
let dir: string;

async function start(env: Record<string, string> = {}): Promise<string> {
  const clean = { ...process.env };
  delete clean.npm_execpath; // as `node scripts/build-if-stale.mjs` run by hand
  const { stderr } = await run("node", ["scripts/build-if-stale.mjs"], {
    cwd: dir,
    env: { ...clean, ...env },
  });
  return stderr;
}

const builds = async () =>
  (await readFile(path.join(dir, "builds"), "utf8").catch(() => "")).length;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-build-stale-"));
  await mkdir(path.join(dir, "scripts"));
  await cp("scripts/build-if-stale.mjs", path.join(dir, "scripts/build-if-stale.mjs"));
  const build = [
    "const fs = require('node:fs');",
    "fs.mkdirSync('dist/dashboard', { recursive: true });",
    "fs.writeFileSync('dist/main.js', '');",
    "fs.writeFileSync('dist/dashboard/index.html', '');",
    "fs.appendFileSync('builds', 'x');",
  ].join(" ");
  await writeFile(
    path.join(dir, "package.json"),
    JSON.stringify({
      name: "stale-check",
      private: true,
      scripts: {
        build: `node -e "${build}" && node scripts/build-if-stale.mjs --stamp`,
      },
    }),
  );
  await mkdir(path.join(dir, "src/util"), { recursive: true });
  await mkdir(path.join(dir, "web"));
  await writeFile(path.join(dir, "src/main.ts"), "export {};\n");
  await writeFile(path.join(dir, "src/util/a.ts"), "export const a = 1;\n");
  await writeFile(path.join(dir, "web/index.html"), "<!doctype html>\n");
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("build-if-stale", () => {
  it("builds when there is no build, then not again until an input changes", async () => {
    expect(await start()).toMatch(/no build yet, running npm run build/);
    expect(await builds()).toBe(1);
    expect(await start()).toMatch(/up to date, not rebuilding/);
    expect(await builds()).toBe(1);

    // An edit (a new modification time), a new file and a removed file each count.
    const later = new Date(Date.now() + 5000);
    await utimes(path.join(dir, "src/util/a.ts"), later, later);
    expect(await start()).toMatch(/sources changed/);
    expect(await builds()).toBe(2);
    await writeFile(path.join(dir, "web/extra.ts"), "export {};\n");
    await start();
    expect(await builds()).toBe(3);
    await unlink(path.join(dir, "web/extra.ts"));
    await start();
    expect(await builds()).toBe(4);
    await start();
    expect(await builds()).toBe(4);

    // A missing output builds again; FOREMAN_BUILD forces either way.
    await unlink(path.join(dir, "dist/main.js"));
    await start();
    expect(await builds()).toBe(5);
    await start({ FOREMAN_BUILD: "always" });
    expect(await builds()).toBe(6);
    await utimes(
      path.join(dir, "src/main.ts"),
      new Date(Date.now() + 9000),
      new Date(Date.now() + 9000),
    );
    await start({ FOREMAN_BUILD: "never" });
    expect(await builds()).toBe(6);
  }, 120_000);
});
