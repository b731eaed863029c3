import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildIndex, type RepoIndex } from "../../src/indexer/index.js";
import { createReadTools } from "../../src/tools/read-tools.js";
import { mayHoldSecrets } from "../../src/indexer/skip.js";
import type { ExecutableTool } from "../../src/llm/types.js";

const execFileAsync = promisify(execFile);

let root: string;
let index: RepoIndex;
let tools: Map<string, ExecutableTool>;

async function write(rel: string, content: string | Buffer): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content);
}

/** Calls a tool the way the pipeline does: arguments checked by its schema first. */
async function call(name: string, args: unknown): Promise<string> {
  const tool = tools.get(name)!;
  return tool.execute(tool.input.parse(args));
}

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-read-tools-"));
  await write("README.md", "# Demo\n");
  await write(
    "src/rate-limit.ts",
    [
      "// Limits requests per client.",
      "export function allowRequest(client: string): boolean {",
      "  return client.length > 0;",
      "}",
      "",
    ].join("\n"),
  );
  await write("src/empty.ts", "");
  await write(
    "src/long.ts",
    Array.from({ length: 1000 }, (_, i) => `const v${i + 1} = ${i};`).join("\n"),
  );
  await write("src/wide.min.txt", "x".repeat(150 * 1024));
  await write("assets/logo.png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 1]));
  for (let i = 0; i < 510; i++)
    await write(`many/file-${String(i).padStart(3, "0")}.txt`, `${i}\n`);
  await execFileAsync("git", ["init", "-q", "-b", "main"], { cwd: root });
  index = await buildIndex(root);
  tools = new Map(createReadTools(root, () => index).map((t) => [t.name, t]));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("read tools", () => {
  it("are the three read tools with strict schemas", () => {
    expect([...tools.keys()]).toEqual(["list_files", "read_file", "search_code"]);
    expect(() => tools.get("read_file")!.input.parse({ path: "a", extra: 1 })).toThrow();
    expect(() => tools.get("read_file")!.input.parse({ path: "a", start_line: 0 })).toThrow();
    expect(() => tools.get("search_code")!.input.parse({ query: "" })).toThrow();
    expect(() => tools.get("search_code")!.input.parse({ query: "x".repeat(501) })).toThrow();
  });
});

describe("list_files", () => {
  it("lists the indexed files under a directory", async () => {
    expect(await call("list_files", { path: "src" })).toBe(
      ["src/empty.ts", "src/long.ts", "src/rate-limit.ts", "src/wide.min.txt"].join("\n"),
    );
    expect(await call("list_files", { path: "./src/" })).toBe(
      await call("list_files", { path: "src" }),
    );
  });

  it("caps a long listing and says how many more there are", async () => {
    const lines = (await call("list_files", {})).split("\n");
    expect(lines).toHaveLength(501);
    expect(lines[0]).toBe("README.md");
    expect(lines[500]).toBe("… 15 more (list a subdirectory to see them)");
    const many = (await call("list_files", { path: "many" })).split("\n");
    expect(many[500]).toBe("… 10 more (list a subdirectory to see them)");
  });

  it("explains unknown directories, files and paths outside the repository", async () => {
    expect(await call("list_files", { path: "nope" })).toBe(
      "Error: no directory 'nope' with indexed files (it does not exist, or everything in it is ignored, vendored or generated).",
    );
    expect(await call("list_files", { path: "src/rate-limit.ts" })).toBe(
      "Error: 'src/rate-limit.ts' is a file, not a directory; use read_file to read it.",
    );
    expect(await call("list_files", { path: "../" })).toBe(
      "Error: '..' may not leave the repository.",
    );
  });
});

describe("read_file", () => {
  it("shows a file with line numbers", async () => {
    expect(await call("read_file", { path: "src/rate-limit.ts" })).toBe(
      [
        "1: // Limits requests per client.",
        "2: export function allowRequest(client: string): boolean {",
        "3:   return client.length > 0;",
        "4: }",
      ].join("\n"),
    );
    expect(await call("read_file", { path: "src/rate-limit.ts", start_line: 2, end_line: 3 })).toBe(
      [
        "2: export function allowRequest(client: string): boolean {",
        "3:   return client.length > 0;",
      ].join("\n"),
    );
    expect(await call("read_file", { path: "src/empty.ts" })).toBe("(src/empty.ts is empty)");
  });

  it("caps long files and says how to read on", async () => {
    const lines = (await call("read_file", { path: "src/long.ts" })).split("\n");
    expect(lines).toHaveLength(401);
    expect(lines[399]).toBe("400: const v400 = 399;");
    expect(lines[400]).toBe(
      "… (showing lines 1–400 of 1000; call read_file with start_line=401 to read further)",
    );
    const tail = (await call("read_file", { path: "src/long.ts", start_line: 990 })).split("\n");
    expect(tail).toHaveLength(11);
    expect(tail[10]).toBe("1000: const v1000 = 999;");
    const wide = await call("read_file", { path: "src/wide.min.txt" });
    expect(wide.length).toBeLessThan(110 * 1024);
    expect(wide).toMatch(/^1: x+… \(line cut at 100 KB\)$/);
  });

  it("explains bad ranges, missing files, directories and binary files", async () => {
    expect(await call("read_file", { path: "src/rate-limit.ts", start_line: 9 })).toBe(
      "Error: 'src/rate-limit.ts' has 4 lines; start_line must be at most 4.",
    );
    expect(await call("read_file", { path: "src/rate-limit.ts", start_line: 3, end_line: 2 })).toBe(
      "Error: end_line (2) is before start_line (3).",
    );
    expect(await call("read_file", { path: "src/missing.ts" })).toBe(
      "Error: no file 'src/missing.ts' in the repository; use list_files or search_code to find the right path.",
    );
    expect(await call("read_file", { path: "src" })).toBe(
      "Error: 'src' is a directory; use list_files to see its files.",
    );
    expect(await call("read_file", { path: "assets/logo.png" })).toBe(
      "Error: 'assets/logo.png' is a binary file (8 bytes); it cannot be shown as text.",
    );
  });

  it("refuses paths outside the repository and inside .git", async () => {
    expect(await call("read_file", { path: "/etc/passwd" })).toBe(
      "Error: paths must be relative to the repository root.",
    );
    expect(await call("read_file", { path: "../../etc/passwd" })).toBe(
      "Error: '..' may not leave the repository.",
    );
    expect(await call("read_file", { path: ".git/config" })).toBe(
      "Error: the .git directory is off limits.",
    );
  });
});

describe("search_code", () => {
  it("returns ranked paths with scores and numbered snippets", async () => {
    const out = await call("search_code", { query: "allowRequest" });
    const [first] = out.split("\n\n");
    expect(first).toMatch(/^src\/rate-limit\.ts \(score \d+\.\d\d\)\n/);
    expect(first).toContain("  2: export function allowRequest(client: string): boolean {");
  });

  it("says when nothing matches", async () => {
    expect(await call("search_code", { query: "zyzzyva" })).toBe(
      'No matches for "zyzzyva". Try other words, a symbol name, or list_files.',
    );
  });
});

describe("files that hold credentials", () => {
  it("are recognised by name", () => {
    for (const p of [
      ".env",
      "config/.env.production",
      "deploy/server.pem",
      "id_rsa",
      ".npmrc",
      "certs/tls.key",
    ])
      expect(mayHoldSecrets(p), p).toBe(true);
    for (const p of [".env.example", ".env.sample", "src/env.ts", "docs/keys.md", "src/key.ts"])
      expect(mayHoldSecrets(p), p).toBe(false);
  });

  it("are never read into the model's context", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-secrets-"));
    try {
      await writeFile(path.join(dir, ".env"), "DATABASE_PASSWORD=hunter2hunter2\n");
      await writeFile(path.join(dir, ".env.example"), "DATABASE_PASSWORD=\n");
      const index = await buildIndex(dir);
      const read = createReadTools(dir, () => index).find((t) => t.name === "read_file")!;
      const refused = await read.execute({ path: ".env" });
      expect(refused).toMatch(/^Error: \.env may hold credentials/);
      expect(refused).not.toContain("hunter2");
      expect(await read.execute({ path: ".env.example" })).toContain("DATABASE_PASSWORD=");
      // Nor through search: the file is not indexed, so no snippet can show the value.
      const search = createReadTools(dir, () => index).find((t) => t.name === "search_code")!;
      const found = await search.execute({ query: "DATABASE_PASSWORD" });
      expect(found).toContain(".env.example");
      expect(found).not.toContain("hunter2");
      expect(index.has(".env")).toBe(false);
      expect(index.search("DATABASE_PASSWORD hunter2hunter2", 10).map((h) => h.path)).toEqual([
        ".env.example",
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
