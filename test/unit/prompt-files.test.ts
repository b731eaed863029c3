// test-matrix: runtime-sensitive: prompt files loaded beside the modules, from src/ by the
// TypeScript loader and from dist/ by this Node.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import {
  PROMPTS as SPEC_PROMPTS,
  specPlannerSystemPrompt,
  specPlannerUserPrompt,
} from "../../src/domain/prism/prompts.js";
import {
  agentSystemPrompt,
  fixUserPrompt,
  implementUserPrompt,
  planningSystemPrompt,
  planningUserPrompt,
  PROMPTS as PIPELINE_PROMPTS,
  reviewUserPrompt,
} from "../../src/pipeline/prompts.js";
import {
  ASK_RULES,
  DESCRIBE_RULES,
  IMPROVE_RULES,
  PR_HELP_PROMPTS,
} from "../../src/tools/pr-help-tools.js";
import { REVIEW_RULES, REVIEW_RULES_PROMPT } from "../../src/tools/review-tool.js";
import { loadPrompt, promptFromText, type PromptFile } from "../../src/util/prompt-file.js";

/*
 * Prompts are files beside the code (src/<folder>/prompts/*.md, util/prompt-file.ts). Every
 * file must be loaded by its module, every placeholder filled by the code that uses it, and
 * the build must ship them next to the compiled modules.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const exec = promisify(execFile);

const LOADED: PromptFile[] = [
  ...Object.values(PIPELINE_PROMPTS),
  ...Object.values(SPEC_PROMPTS),
  REVIEW_RULES_PROMPT,
  ...Object.values(PR_HELP_PROMPTS),
];

async function promptFilesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter(
      (e) => e.isFile() && e.name.endsWith(".md") && path.basename(e.parentPath) === "prompts",
    )
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

const tmp: string[] = [];
afterAll(async () => {
  await Promise.all(tmp.map((dir) => rm(dir, { recursive: true, force: true })));
});

describe("prompt files", () => {
  it("are each loaded by the module beside them", async () => {
    const onDisk = await promptFilesUnder(path.join(ROOT, "src"));
    const loaded = LOADED.map((p) => path.relative(path.join(ROOT, "src"), p.file)).sort();
    expect(onDisk.length).toBeGreaterThanOrEqual(12);
    expect(loaded).toEqual(onDisk);
  });

  it("leave no placeholder unfilled in any prompt the code builds", () => {
    const task = {
      description: "Add a {{literal}} example",
      repo: { full_name: "octo/repo", default_branch: "main" },
    };
    const steps = [{ step: 1, title: "Edit", description: "Change it", files: ["a.ts"] }];
    const plan = { summary: "Do it", steps };
    const built = [
      planningSystemPrompt(task, "INSTRUCTIONS", "MEMORY"),
      planningUserPrompt(task, { tree: "a.ts", hits: [{ path: "a.ts", snippet: "x" }], map: "" }),
      agentSystemPrompt(task, "", "", "implement"),
      agentSystemPrompt(task, "", "", "fix"),
      implementUserPrompt(task, plan),
      implementUserPrompt(task, plan, { worker: 1, workers: 2, steps, files: ["a.ts"] }),
      fixUserPrompt(task, { attempt: 1, maxAttempts: 2, failures: "FAILED", diff: "" }),
      reviewUserPrompt(task, plan, "DIFF", "CHECKS"),
      specPlannerSystemPrompt([{ name: "docs", description: "Docs" }], 9),
      specPlannerUserPrompt("SPEC"),
      REVIEW_RULES,
      DESCRIBE_RULES,
      ASK_RULES,
      IMPROVE_RULES,
    ];
    for (const text of built) {
      // The task's own "{{literal}}" is data and stays; nothing else is left in braces.
      expect(text.replaceAll("{{literal}}", "")).not.toMatch(/\{\{\w+\}\}/);
      expect(text.trim()).not.toBe("");
    }
    expect(built[0]).toContain("octo/repo (branch main)");
    expect(built[1]).toContain("Add a {{literal}} example");
    expect(built[6]).toContain("(fix attempt 1 of 2)");
    expect(built[6]).toContain("(no changes yet)");
    expect(built[8]).toContain("at most 9)");
    expect(built[8]).toContain("- docs: Docs");
  });

  it("fill exactly their placeholders, values taken literally", () => {
    const prompt = promptFromText("x.md", "Hello {{name}}, {{name}} again ($1)\n");
    expect(prompt.placeholders).toEqual(["name"]);
    expect(prompt.fill({ name: "$& {{name}}" })).toBe("Hello $& {{name}}, $& {{name}} again ($1)");
    expect(() => prompt.fill({})).toThrow("x.md: no value for name");
    expect(() => prompt.fill({ name: "a", other: "b" })).toThrow("no placeholder for other");
  });

  it("are read from src/ for a module that tsc alone compiled into dist/", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "prompts-tsc-"));
    tmp.push(dir);
    await mkdir(path.join(dir, "src/stage/prompts"), { recursive: true });
    await writeFile(path.join(dir, "src/stage/prompts/hi.md"), "Hi {{who}}.\n");
    const module = pathToFileURL(path.join(dir, "dist/stage/mod.js")).href;
    const prompt = loadPrompt(module, "prompts/hi.md");
    expect(prompt.file).toBe(path.join(dir, "src/stage/prompts/hi.md"));
    expect(prompt.fill({ who: "there" })).toBe("Hi there.");
    expect(() => loadPrompt(module, "prompts/missing.md")).toThrow(/ENOENT/);
  });

  it("are copied next to the compiled modules by the build", async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), "prompts-dist-"));
    tmp.push(out);
    await exec(process.execPath, [
      path.join(ROOT, "scripts/copy-prompts.mjs"),
      path.join(ROOT, "src"),
      out,
    ]);
    const copied = await promptFilesUnder(out);
    expect(copied).toEqual(await promptFilesUnder(path.join(ROOT, "src")));
    for (const rel of copied)
      expect(await readFile(path.join(out, rel), "utf8")).toBe(
        await readFile(path.join(ROOT, "src", rel), "utf8"),
      );
  });
});
