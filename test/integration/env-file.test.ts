// test-matrix: runtime-sensitive: the .env loader and the log format of the built service on
// this Node (Node's own .env parsing differs from one major to the next).
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/*
 * The entry point reads `.env` from its working directory (variables already set win), and
 * LOG_FORMAT=pretty prints readable lines instead of JSON. Both through real processes: the
 * built entry point (`dist/main.js`, as `npm start` runs it; tsx compiling the whole service
 * in the child took a minute on a loaded machine) with a configuration that stops at the
 * check (exit 2, no database), and a small logging script under tsx.
 */

const root = path.resolve(import.meta.dirname, "../..");
const main = path.join(root, "dist", "main.js");
const tsx = import.meta.resolve("tsx");
let dir: string;

beforeAll(async () => {
  if (!existsSync(main))
    await promisify(execFile)("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: root });
  dir = await mkdtemp(path.join(os.tmpdir(), "foreman-envfile-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs `node <args>` in `cwd`; resolves to its exit code and output. */
async function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; output: string }> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(APP_ID|METRICS|LOG_FORMAT|ENV_FILE|PRIVATE_KEY|WEBHOOK_SECRET)/.test(name),
    ),
  ) as Record<string, string>;
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, args, {
      cwd: dir,
      env: { ...clean, ...env },
      timeout: 60_000,
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

describe(".env and LOG_FORMAT", () => {
  it("loads .env from the working directory without overriding variables already set", async () => {
    await writeFile(path.join(dir, ".env"), "APP_ID=12345\nMETRICS=token\n");
    // METRICS from the process wins over the file's; APP_ID comes from the file.
    const { code, output } = await run([main], { METRICS: "auto" });
    expect(code).toBe(2);
    expect(output).toContain("PRIVATE_KEY or PRIVATE_KEY_PATH: required when APP_ID is set");
    expect(output).not.toContain("METRICS_TOKEN");

    // ENV_FILE names another file.
    await writeFile(path.join(dir, "other.env"), "METRICS=token\n");
    const other = await run([main], { ENV_FILE: "other.env" });
    expect(other.code).toBe(2);
    expect(other.output).toContain("METRICS_TOKEN: required when METRICS is token");
    expect(other.output).not.toContain("APP_ID");
  }, 120_000);

  it("prints readable lines with LOG_FORMAT=pretty, still redacted", async () => {
    const script = path.join(dir, "log.ts");
    await writeFile(
      script,
      `import { createLogger } from ${JSON.stringify(path.join(root, "src/util/logger.ts"))};
import { registerSecret } from ${JSON.stringify(path.join(root, "src/util/redact.ts"))};
registerSecret("pretty-secret-0123456789");
const format = process.env.LOG_FORMAT === "pretty" ? "pretty" : "json";
createLogger({ format }).info({ token: "pretty-secret-0123456789" }, "hello operator");
`,
    );
    const pretty = await run(["--import", tsx, script], { LOG_FORMAT: "pretty", NO_COLOR: "1" });
    expect(pretty.code).toBe(0);
    expect(pretty.output).toMatch(/INFO.*hello operator/);
    expect(pretty.output.trim().startsWith("{")).toBe(false);
    expect(pretty.output).not.toContain("pretty-secret-0123456789");
    const json = await run(["--import", tsx, script], {});
    expect(JSON.parse(json.output.trim())).toMatchObject({ msg: "hello operator", level: 30 });
    expect(json.output).not.toContain("pretty-secret-0123456789");
  }, 120_000);
});
