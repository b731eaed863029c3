// test-matrix: runtime-sensitive: the service's own process started by this Node, on a
// pseudo-terminal: its stdout's isTTY and the log's format follow from it.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/db/embedded.js";
import { SERVICE_VERSION } from "../../src/util/version.js";

/*
 * The start-up log a person reads (issue 43): readable lines on a terminal by default, JSON
 * when stdout is not a terminal or LOG_FORMAT=json asks for it; short lines that say where
 * the API, the dashboard and the docs are. The terminal is a real pseudo-terminal (util-linux
 * `script`), the service the real one on its embedded database.
 */

const root = path.resolve(import.meta.dirname, "../..");
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;
let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "foreman-start-log-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

/** The service's output until its API line, started on a terminal or on a pipe. */
async function startOutput(options: { terminal: boolean; env?: Record<string, string> }) {
  const port = await freePort();
  // Undefined values are left out of the child's environment (child_process.spawn).
  const env: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(port),
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    RUN_WORKERS: "false",
    ENV_FILE: "/nonexistent/.env",
    MONGODB_URI: undefined,
    LOG_FORMAT: undefined,
    ...options.env,
  };
  const command = [process.execPath, "--import", "tsx", "src/main.ts"];
  const child = options.terminal
    ? spawn("script", ["-qec", command.join(" "), "/dev/null"], { cwd: root, env })
    : spawn(command[0]!, command.slice(1), { cwd: root, env });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  try {
    // Minutes on a loaded 2-core machine, seconds otherwise.
    const deadline = Date.now() + 120_000;
    while (!/API: .*\n/.test(output.replace(ANSI, "").replace(/\r/g, ""))) {
      if (child.exitCode !== null) throw new Error(`service exited ${child.exitCode}: ${output}`);
      if (Date.now() > deadline) throw new Error(`no API line within 120 s: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    if (child.exitCode === null) child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode === null ? child.once("exit", r) : r(undefined)));
  }
  const lines = output
    .replace(ANSI, "")
    .replace(/\r/g, "")
    .split("\n")
    // script's own words when it is stopped
    .filter((l) => l && !/^Session terminated|^\.\.\.killed/.test(l));
  return { port, lines };
}

describe("the start-up log", () => {
  it("is readable on a terminal, and says where the API, the dashboard and the docs are", async () => {
    const { port, lines } = await startOutput({ terminal: true });
    const base = `http://127.0.0.1:${port}`;
    expect(lines.filter((l) => l.startsWith("{"))).toEqual([]);
    const message = (text: string) =>
      lines.find((l) => /^\[\d\d:\d\d:\d\d\] (INFO|WARN)/.test(l) && l.includes(text));
    expect(message(`listening on ${base}: foreman ${SERVICE_VERSION}, web only`)).toMatch(
      /^\[\d\d:\d\d:\d\d\] INFO: listening/,
    );
    expect(message(`dashboard: ${base}/dashboard/`)).toBeDefined();
    expect(
      message(`API: ${base}/ (OpenAPI /openapi.json, task events /asyncapi.json, MCP /mcp)`),
    ).toContain('docs: README.md "First task", docs/api.md');
    // Short lines: the first, and the summary and where-lines, each under 200 characters.
    expect(lines[0]!.length).toBeLessThan(200);
    const summary = lines.filter((l) => /INFO: (listening|dashboard|API|configuration)/.test(l));
    expect(summary).toHaveLength(4);
    for (const line of summary) expect(line.length).toBeLessThan(200);
  }, 180_000);

  it("is JSON on a terminal when LOG_FORMAT=json asks, and when stdout is not a terminal", async () => {
    for (const started of [
      await startOutput({ terminal: true, env: { LOG_FORMAT: "json" } }),
      await startOutput({ terminal: false }),
    ]) {
      const records = started.lines.map((l) => JSON.parse(l) as { msg: string; level: number });
      expect(records.map((r) => r.msg)).toContain(
        `dashboard: http://127.0.0.1:${started.port}/dashboard/`,
      );
    }
  }, 300_000);
});
