import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createWriteTools,
  type FileChange,
  type WriteToolOptions,
} from "../../src/tools/write-tools.js";
import type { ExecutableTool } from "../../src/llm/types.js";

let root: string;
let outside: string;

async function put(rel: string, content: string | Buffer): Promise<void> {
  await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
  await writeFile(path.join(root, rel), content);
}

async function read(rel: string): Promise<string> {
  return readFile(path.join(root, rel), "utf8");
}

async function exists(abs: string): Promise<boolean> {
  return lstat(abs).then(
    () => true,
    () => false,
  );
}

function toolsOf(options?: WriteToolOptions): Map<string, ExecutableTool> {
  return new Map(createWriteTools(root, options).map((tool) => [tool.name, tool]));
}

/** Calls a tool the way the pipeline does: arguments checked by its schema first. */
async function call(
  name: string,
  args: unknown,
  tools: Map<string, ExecutableTool> = toolsOf(),
): Promise<string> {
  const tool = tools.get(name)!;
  return tool.execute(tool.input.parse(args));
}

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-write-tools-"));
  outside = await mkdtemp(path.join(os.tmpdir(), "foreman-write-outside-"));
  await put("src/a.ts", "export const a = 1;\nexport const b = 2;\n");
  await put(".git/config", "[core]\n");
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe("write tools", () => {
  it("are write_file, edit_file and delete_file with strict schemas", () => {
    const tools = toolsOf();
    expect([...tools.keys()]).toEqual(["write_file", "edit_file", "delete_file"]);
    const write = tools.get("write_file")!;
    expect(write.input.safeParse({ path: "a", content: "x" }).success).toBe(true);
    expect(write.input.safeParse({ path: "a", content: "x", mode: "755" }).success).toBe(false);
    expect(tools.get("edit_file")!.input.safeParse({ path: "a", old_text: "x" }).success).toBe(
      false,
    );
  });
});

describe("confinement", () => {
  it("refuses paths that leave the repository and writes nothing outside", async () => {
    await symlink(outside, path.join(root, "link"));
    const attempts = [
      "../outside.txt",
      "src/../../x",
      `../${path.basename(outside)}/escape.txt`,
      path.join(outside, "absolute.txt"),
      "link/evil.txt",
      "link/deeper/evil.txt",
    ];
    for (const attempt of attempts) {
      const result = await call("write_file", { path: attempt, content: "pwned" });
      expect(result, attempt).toMatch(/^Error: /);
    }
    expect(await readdir(outside)).toEqual([]);
    expect(await exists(path.join(path.dirname(root), "x"))).toBe(false);
    expect(await exists(path.join(path.dirname(root), "outside.txt"))).toBe(false);
  });

  it("refuses to edit or delete a file outside through a symlinked directory", async () => {
    await writeFile(path.join(outside, "victim.txt"), "keep me\n");
    await symlink(outside, path.join(root, "link"));
    const edit = await call("edit_file", {
      path: "link/victim.txt",
      old_text: "keep me",
      new_text: "changed",
    });
    expect(edit).toMatch(/^Error: .*outside the repository/);
    expect(await call("delete_file", { path: "link/victim.txt" })).toMatch(/^Error: /);
    expect(await readFile(path.join(outside, "victim.txt"), "utf8")).toBe("keep me\n");
  });

  it("refuses a file that is a symbolic link, even one pointing inside", async () => {
    await symlink("a.ts", path.join(root, "src/alias.ts"));
    const write = await call("write_file", { path: "src/alias.ts", content: "changed\n" });
    expect(write).toBe(
      "Error: src/alias.ts is a symbolic link; write the file it points to instead.",
    );
    const edit = await call("edit_file", {
      path: "src/alias.ts",
      old_text: "export const a = 1;",
      new_text: "export const a = 2;",
    });
    expect(edit).toMatch(/^Error: src\/alias\.ts is a symbolic link/);
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
    expect(await readlink(path.join(root, "src/alias.ts"))).toBe("a.ts");
  });

  it("refuses a file symlink pointing outside, even to a file that does not exist yet", async () => {
    await symlink(path.join(outside, "target.txt"), path.join(root, "out.txt"));
    expect(await call("write_file", { path: "out.txt", content: "pwned" })).toMatch(/^Error: /);
    expect(await readdir(outside)).toEqual([]);
  });

  it("refuses .git and files that may hold credentials", async () => {
    for (const attempt of [".git/config", ".GIT/config", "sub/.git/hooks/pre-commit"]) {
      const result = await call("write_file", { path: attempt, content: "[evil]\n" });
      expect(result, attempt).toBe("Error: the .git directory is off limits.");
    }
    expect(await read(".git/config")).toBe("[core]\n");
    expect(await call("delete_file", { path: ".git/config" })).toMatch(/^Error: /);
    expect(await exists(path.join(root, ".git/config"))).toBe(true);

    for (const attempt of [".env", "config/.env.production", "deploy/server.pem", "id_rsa"]) {
      const result = await call("write_file", { path: attempt, content: "SECRET=1\n" });
      expect(result, attempt).toBe(
        `Error: ${attempt} may hold credentials, so it may not be changed.`,
      );
      expect(await exists(path.join(root, attempt))).toBe(false);
    }
    // Its documented template is fine to write.
    expect(await call("write_file", { path: ".env.example", content: "SECRET=\n" })).toMatch(
      /^Created \.env\.example/,
    );
  });

  it("refuses the root, directories and empty paths", async () => {
    expect(await call("write_file", { path: ".", content: "x" })).toMatch(/^Error: /);
    expect(await call("write_file", { path: "src", content: "x" })).toBe(
      "Error: src is a directory; choose a file path.",
    );
    expect(await call("write_file", { path: "  ", content: "x" })).toBe(
      "Error: the path is empty.",
    );
    expect(await call("write_file", { path: "src/a.ts/inner.ts", content: "x" })).toMatch(
      /^Error: /,
    );
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
  });
});

describe("write_file", () => {
  it("creates a file and its parent directories", async () => {
    const result = await call("write_file", {
      path: "src/deep/new/mod.ts",
      content: "export {};\nconst x = 1;\n",
    });
    expect(result).toBe("Created src/deep/new/mod.ts (2 lines, 24 bytes).");
    expect(await read("src/deep/new/mod.ts")).toBe("export {};\nconst x = 1;\n");
    // No temporary file is left behind.
    expect(await readdir(path.join(root, "src/deep/new"))).toEqual(["mod.ts"]);
  });

  it("replaces an existing file, keeping its mode and its CRLF line endings", async () => {
    await put("run.sh", "#!/bin/sh\r\necho old\r\n");
    await chmod(path.join(root, "run.sh"), 0o755);
    const result = await call("write_file", { path: "run.sh", content: "#!/bin/sh\necho new\n" });
    expect(result).toBe("Wrote run.sh (2 lines, 21 bytes, CRLF line endings kept).");
    expect(await read("run.sh")).toBe("#!/bin/sh\r\necho new\r\n");
    expect((await stat(path.join(root, "run.sh"))).mode & 0o777).toBe(0o755);
  });

  it("refuses content over the size limit", async () => {
    const tools = toolsOf({ maxFileBytes: 10 });
    expect(await call("write_file", { path: "ok.txt", content: "0123456789" }, tools)).toBe(
      "Created ok.txt (1 line, 10 bytes).",
    );
    const result = await call("write_file", { path: "big.txt", content: "é123456789" }, tools);
    expect(result).toBe(
      "Error: the new content of big.txt would be 11 bytes, more than the limit of 10 bytes.",
    );
    expect(await exists(path.join(root, "big.txt"))).toBe(false);
  });
});

describe("edit_file", () => {
  it("replaces the one occurrence of old_text", async () => {
    const result = await call("edit_file", {
      path: "src/a.ts",
      old_text: "export const b = 2;",
      new_text: "export const b = 3;\nexport const c = 4;",
    });
    expect(result).toBe(
      "Edited src/a.ts at line 2: replaced 1 line with 2 lines. The lines around the edit now:\n" +
        "1: export const a = 1;\n2: export const b = 3;\n3: export const c = 4;",
    );
    expect(await read("src/a.ts")).toBe(
      "export const a = 1;\nexport const b = 3;\nexport const c = 4;\n",
    );
  });

  it("says when old_text is missing and points at the closest line", async () => {
    const result = await call("edit_file", {
      path: "src/a.ts",
      old_text: "export const b = 20;",
      new_text: "export const b = 3;",
    });
    expect(result).toBe(
      "Error: old_text was not found in src/a.ts; read the file again and copy the text exactly. " +
        'The line most like the first line of old_text is line 2: "export const b = 2;".',
    );
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
  });

  it("refuses an ambiguous old_text, naming the lines", async () => {
    await put("src/dup.ts", "x();\ny();\nx();\n");
    const result = await call("edit_file", {
      path: "src/dup.ts",
      old_text: "x();",
      new_text: "z();",
    });
    expect(result).toBe(
      "Error: old_text occurs 2 times in src/dup.ts (at lines 1, 3); include more surrounding lines so it is unique.",
    );
    expect(await read("src/dup.ts")).toBe("x();\ny();\nx();\n");
  });

  it("keeps CRLF line endings when old_text and new_text use LF", async () => {
    await put("win.txt", "one\r\ntwo\r\nthree\r\n");
    const result = await call("edit_file", {
      path: "win.txt",
      old_text: "one\ntwo\n",
      new_text: "uno\ndos\n",
    });
    expect(result).toMatch(/^Edited win\.txt at line 1/);
    expect(await read("win.txt")).toBe("uno\r\ndos\r\nthree\r\n");
  });

  it("refuses an empty old_text, a missing file, and text that is not UTF-8", async () => {
    expect(await call("edit_file", { path: "src/a.ts", old_text: "", new_text: "x" })).toMatch(
      /^Error: old_text is empty/,
    );
    expect(await call("edit_file", { path: "src/nope.ts", old_text: "a", new_text: "b" })).toBe(
      "Error: no file src/nope.ts in the repository; use write_file to create it.",
    );
    await put("latin1.txt", Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect(
      await call("edit_file", { path: "latin1.txt", old_text: "caf", new_text: "bar" }),
    ).toMatch(/^Error: latin1\.txt is not UTF-8 text/);
    expect(await readFile(path.join(root, "latin1.txt"))).toEqual(
      Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
    );
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
  });

  it("refuses an edit whose result is over the size limit", async () => {
    const tools = toolsOf({ maxFileBytes: 50 });
    const result = await call(
      "edit_file",
      { path: "src/a.ts", old_text: "= 2;", new_text: `= ${"9".repeat(20)};` },
      tools,
    );
    expect(result).toMatch(/^Error: the new content of src\/a\.ts would be 59 bytes/);
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
  });
});

describe("delete_file", () => {
  it("deletes a file, and explains a missing file or a directory", async () => {
    expect(await call("delete_file", { path: "src/a.ts" })).toBe("Deleted src/a.ts.");
    expect(await exists(path.join(root, "src/a.ts"))).toBe(false);
    expect(await call("delete_file", { path: "src/a.ts" })).toBe(
      "Error: no file src/a.ts in the repository, so there is nothing to delete.",
    );
    expect(await call("delete_file", { path: "src" })).toBe(
      "Error: src is a directory, not a file.",
    );
    expect(await exists(path.join(root, "src"))).toBe(true);
  });

  it("removes a symbolic link itself, not what it points to", async () => {
    await symlink("a.ts", path.join(root, "src/alias.ts"));
    expect(await call("delete_file", { path: "src/alias.ts" })).toBe(
      "Deleted the symbolic link src/alias.ts.",
    );
    expect(await exists(path.join(root, "src/alias.ts"))).toBe(false);
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");
  });
});

describe("allowedFiles", () => {
  it("lets a worker change only the files of its part of the plan", async () => {
    const tools = toolsOf({ allowedFiles: new Set(["src/a.ts", "./src/new.ts"]) });
    const refused = await call("write_file", { path: "src/b.ts", content: "x\n" }, tools);
    expect(refused).toBe(
      "Error: src/b.ts is not in the files of this worker's part of the plan: src/a.ts, src/new.ts. Change only those files.",
    );
    expect(await exists(path.join(root, "src/b.ts"))).toBe(false);
    expect(
      await call("edit_file", { path: "README.md", old_text: "a", new_text: "b" }, tools),
    ).toMatch(/^Error: README\.md is not in the files/);

    expect(await call("write_file", { path: "src/new.ts", content: "x\n" }, tools)).toMatch(
      /^Created src\/new\.ts/,
    );
    expect(
      await call("edit_file", { path: "./src/a.ts", old_text: "= 1", new_text: "= 5" }, tools),
    ).toMatch(/^Edited src\/a\.ts/);
  });

  it("judges a path by where it really leads, not by a symlinked directory's name", async () => {
    await symlink("src", path.join(root, "alias"));
    const changes: FileChange[] = [];
    const onlyLib = toolsOf({
      allowedFiles: new Set(["alias/a.ts"]),
      onChange: (c) => changes.push(c),
    });
    expect(
      await call("edit_file", { path: "alias/a.ts", old_text: "= 1", new_text: "= 5" }, onlyLib),
    ).toMatch(/^Error: src\/a\.ts is not in the files/);
    expect(await read("src/a.ts")).toBe("export const a = 1;\nexport const b = 2;\n");

    const onlySrc = toolsOf({
      allowedFiles: new Set(["src/a.ts"]),
      onChange: (c) => changes.push(c),
    });
    expect(
      await call("edit_file", { path: "alias/a.ts", old_text: "= 1", new_text: "= 5" }, onlySrc),
    ).toMatch(/^Edited src\/a\.ts at line 1: replaced 1 line with 1 line\./);
    expect(changes).toEqual([{ path: "src/a.ts", kind: "edit" }]);
  });

  it("caps the list of allowed files in the refusal", async () => {
    const files = Array.from({ length: 25 }, (_, i) => `f/${String(i).padStart(2, "0")}.ts`);
    const tools = toolsOf({ allowedFiles: new Set(files) });
    const result = await call("delete_file", { path: "src/a.ts" }, tools);
    expect(result).toContain("f/00.ts, f/01.ts");
    expect(result).toContain("f/19.ts, … and 5 more.");
    expect(result).not.toContain("f/20.ts");
    expect(await exists(path.join(root, "src/a.ts"))).toBe(true);
  });
});

describe("onChange", () => {
  it("is called after each successful change and not after a refusal", async () => {
    const changes: FileChange[] = [];
    const tools = toolsOf({ onChange: (change) => changes.push(change) });
    await call("write_file", { path: "src/b.ts", content: "b\n" }, tools);
    await call("edit_file", { path: "src/b.ts", old_text: "b", new_text: "c" }, tools);
    await call("edit_file", { path: "src/b.ts", old_text: "zzz", new_text: "c" }, tools);
    await call("write_file", { path: "../x.ts", content: "x" }, tools);
    await call("delete_file", { path: "src/b.ts" }, tools);
    await call("delete_file", { path: "src/b.ts" }, tools);
    expect(changes).toEqual([
      { path: "src/b.ts", kind: "write" },
      { path: "src/b.ts", kind: "edit" },
      { path: "src/b.ts", kind: "delete" },
    ]);
  });
});

describe("redaction marks (issue #40, finding 1)", () => {
  it("never writes [REDACTED] over the text a secret's mark stood for", async () => {
    await put("src/add.js", "export function add(a, b) {\n  return a + b;\n}\n");
    // The model read the file with "export function" redacted and writes back what it read.
    const rewrite = await call("write_file", {
      path: "src/add.js",
      content: "[REDACTED] add(a, b) {\n  return a + b + 0;\n}\n",
    });
    expect(rewrite).toMatch(/^Error: .*\[REDACTED\], which stands for text the service hid/);
    const edit = await call("edit_file", {
      path: "src/add.js",
      old_text: "  return a + b;",
      new_text: "  return [REDACTED];",
    });
    expect(edit).toMatch(/^Error: .*\[REDACTED\]/);
    const created = await call("write_file", { path: "src/new.js", content: "[REDACTED]\n" });
    expect(created).toMatch(/^Error: /);
    expect(await read("src/add.js")).toBe("export function add(a, b) {\n  return a + b;\n}\n");
    expect(await exists(path.join(root, "src/new.js"))).toBe(false);
  });

  it("keeps marks a file already has (a redaction helper's own code)", async () => {
    await put("src/mask.js", 'export const MASK = "[REDACTED]";\n');
    const rewrite = await call("write_file", {
      path: "src/mask.js",
      content: 'export const MASK = "[REDACTED]"; // the mark\n',
    });
    expect(rewrite).toMatch(/^Wrote src\/mask.js/);
    const edit = await call("edit_file", {
      path: "src/mask.js",
      old_text: '"[REDACTED]"; // the mark',
      new_text: '"[REDACTED]";',
    });
    expect(edit).not.toMatch(/^Error/);
  });
});
