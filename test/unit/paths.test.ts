import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PathError, resolveInside } from "../../src/util/paths.js";

let base: string;
let root: string;
let outside: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "foreman-paths-"));
  root = path.join(base, "repo");
  outside = path.join(base, "outside");
  await mkdir(path.join(root, "src/nested"), { recursive: true });
  await mkdir(path.join(root, ".git"), { recursive: true });
  await mkdir(outside, { recursive: true });
  await writeFile(path.join(root, "src/nested/file.ts"), "export {};\n");
  await writeFile(path.join(root, ".git/config"), "[core]\n");
  await writeFile(path.join(outside, "secret.txt"), "secret\n");
  await symlink(path.join(outside, "secret.txt"), path.join(root, "src/secret-link.txt"));
  await symlink(outside, path.join(root, "src/outside-dir"));
  await symlink("nested", path.join(root, "src/inside-dir"));
  await symlink(path.join(outside, "missing.txt"), path.join(root, "src/dangling.txt"));
  await symlink("../.git", path.join(root, "src/git-link"));
});

afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(relative: string): Promise<string> {
  const error = await resolveInside(root, relative).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `${relative} should be refused`).toBeInstanceOf(PathError);
  return (error as PathError).message;
}

describe("resolveInside", () => {
  it("resolves nested paths, existing or not yet, to absolute paths under the root", async () => {
    expect(await resolveInside(root, "src/nested/file.ts")).toBe(
      path.join(root, "src/nested/file.ts"),
    );
    expect(await resolveInside(root, "./src//nested/../nested/file.ts")).toBe(
      path.join(root, "src/nested/file.ts"),
    );
    expect(await resolveInside(root, "src/new/dir/file.ts")).toBe(
      path.join(root, "src/new/dir/file.ts"),
    );
    expect(await resolveInside(root, "src/inside-dir/file.ts")).toBe(
      path.join(root, "src/inside-dir/file.ts"),
    );
    expect(await resolveInside(root, ".")).toBe(root);
    expect(await resolveInside(root, ".gitignore")).toBe(path.join(root, ".gitignore"));
  });

  it("refuses '..' that leaves the repository", async () => {
    expect(await refusal("..")).toBe("'..' may not leave the repository");
    expect(await refusal("../outside/secret.txt")).toBe("'..' may not leave the repository");
    expect(await refusal("src/../../outside")).toBe("'..' may not leave the repository");
    expect(await refusal("src\\..\\..\\outside")).toBe("'..' may not leave the repository");
  });

  it("refuses absolute, empty and NUL-containing paths", async () => {
    expect(await refusal("/etc/passwd")).toBe("paths must be relative to the repository root");
    expect(await refusal(path.join(root, "src/nested/file.ts"))).toBe(
      "paths must be relative to the repository root",
    );
    expect(await refusal("C:\\Windows\\system.ini")).toBe(
      "paths must be relative to the repository root",
    );
    expect(await refusal("c:relative")).toBe("paths must be relative to the repository root");
    expect(await refusal("")).toBe("the path is empty");
    expect(await refusal("src/a\0b")).toBe("the path contains a NUL byte");
  });

  it("refuses symbolic links that lead outside, to a file or a directory", async () => {
    const message = "the path leads outside the repository through a symbolic link";
    expect(await refusal("src/secret-link.txt")).toBe(message);
    expect(await refusal("src/outside-dir")).toBe(message);
    expect(await refusal("src/outside-dir/secret.txt")).toBe(message);
    // Not there yet, but writing it would land outside.
    expect(await refusal("src/outside-dir/new/file.txt")).toBe(message);
    expect(await refusal("src/dangling.txt")).toBe(
      "the path passes through a broken symbolic link",
    );
  });

  it("refuses anything inside .git, however it is reached", async () => {
    expect(await refusal(".git/config")).toBe("the .git directory is off limits");
    expect(await refusal(".git")).toBe("the .git directory is off limits");
    expect(await refusal("src/../.git/config")).toBe("the .git directory is off limits");
    expect(await refusal(".GIT/config")).toBe("the .git directory is off limits");
    expect(await refusal("src/git-link/config")).toBe(
      "the path leads into the .git directory through a symbolic link",
    );
  });
});
