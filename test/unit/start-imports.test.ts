import { execFile } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

/*
 * Every process of the service (web, worker, the admin CLI) imports the application context
 * at start. Libraries that serve one feature each are loaded when that feature first runs:
 * together they took 2 of the 3.5 s a process spent importing (the TypeScript compiler for
 * syntax checks and the documentation metric, jscpd for duplication, Slack's Bolt with
 * Express for one signature check, jira.js). Checked in a fresh Node process, where nothing
 * else loaded them. The three CommonJS ones show in require's cache; jira.js is an ES module
 * there, which the cache does not list.
 */
const root = path.resolve(import.meta.dirname, "../..");

describe("the service's start", () => {
  it("leaves the libraries of single features unloaded until the feature runs", async () => {
    const context = pathToFileURL(path.join(root, "src/context.ts")).href;
    const script = [
      `await import(${JSON.stringify(context)});`,
      'const { createRequire } = await import("node:module");',
      "console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));",
    ].join("\n");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    );
    const loaded = JSON.parse(stdout.trim().split("\n").at(-1)!) as string[];
    const packages = (name: string) => loaded.filter((f) => f.includes(`/node_modules/${name}/`));
    // What the check can see: CommonJS packages the service does load at start.
    expect(packages("mongoose").length).toBeGreaterThan(0);
    for (const name of ["typescript", "@jscpd/core", "@jscpd/tokenizer", "@slack/bolt", "express"])
      expect(packages(name), name).toEqual([]);
  }, 60_000);
});
