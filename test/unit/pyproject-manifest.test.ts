import { describe, expect, it } from "vitest";
import { readRepoFiles } from "../../src/health/files.js";
import { readManifests } from "../../src/health/manifests.js";
import { createGitRepo } from "../helpers/git-repo.js";

/*
 * pyproject.toml as a manifest (src/ecosystems/python.ts): the forms real projects write,
 * read from a real repository the way the health scan reads it.
 */

async function manifestsOf(files: Record<string, string>) {
  const repo = await createGitRepo(files);
  try {
    const manifests = await readManifests(repo.dir, await readRepoFiles(repo.dir));
    return {
      deps: manifests.dependencies
        .filter((d) => d.manifest === "pyproject.toml")
        .map((d) => [d.name, d.declared, d.range, d.exact, d.dev]),
      skipped: manifests.skipped,
      all: manifests.dependencies,
    };
  } finally {
    await repo.remove();
  }
}

describe("pyproject.toml dependencies", () => {
  it("reads a multi-line array with extras, markers and comments holding brackets", async () => {
    const { deps } = await manifestsOf({
      "pyproject.toml": [
        "# Build settings [see docs]",
        "[project]",
        'name = "svc"',
        "# runtime deps below [not a table header]",
        "dependencies = [",
        '  "requests>=2.31",  # loosely pinned [on purpose]',
        "  'flask==3.0.0',",
        '  "uvicorn[standard]>=0.20",',
        "  \"tomli>=2.0; python_version < '3.11'\",",
        "]",
        "",
        "[tool.black]",
        "line-length = 100",
        "",
      ].join("\n"),
    });
    expect(deps).toEqual([
      ["requests", ">=2.31", ">=2.31.0", null, false],
      ["flask", "==3.0.0", "3.0.0", "3.0.0", false],
      ["uvicorn", ">=0.20", ">=0.20.0", null, false],
      ["tomli", ">=2.0", ">=2.0.0", null, false],
    ]);
  });

  it("reads dotted keys and inline tables", async () => {
    const dotted = await manifestsOf({
      "pyproject.toml": 'project.name = "x"\nproject.dependencies = ["attrs>=23"]\n',
    });
    expect(dotted.deps).toEqual([["attrs", ">=23", ">=23.0.0", null, false]]);
    const inline = await manifestsOf({
      "pyproject.toml": 'project = { name = "x", dependencies = ["click~=8.1"] }\n',
    });
    expect(inline.deps).toEqual([["click", "~=8.1", ">=8.1.0 <9.0.0", null, false]]);
  });

  it("reads Poetry's dependency tables, development groups as dev", async () => {
    const { deps, skipped } = await manifestsOf({
      "pyproject.toml": [
        "[tool.poetry]",
        'name = "svc"',
        "",
        "[tool.poetry.dependencies]",
        'python = "^3.10"',
        'django = "^4.2"',
        'celery = { version = "~5.3", extras = ["redis"] }',
        'pinned = "1.2.3"',
        'anything = "*"',
        'mylib = { git = "https://github.com/acme/mylib.git" }',
        "",
        "[tool.poetry.group.dev.dependencies]",
        'black = ">=23,<24"',
        "",
        "[tool.poetry.dev-dependencies]",
        'pytest = "^7.4"',
        "",
      ].join("\n"),
    });
    expect(deps).toEqual([
      ["django", "^4.2", ">=4.2.0 <5.0.0-0", null, false],
      ["celery", "~5.3", ">=5.3.0 <5.4.0-0", null, false],
      ["pinned", "1.2.3", "1.2.3", "1.2.3", false],
      ["anything", "*", "*", null, false],
      ["pytest", "^7.4", ">=7.4.0 <8.0.0-0", null, true],
      ["black", ">=23,<24", ">=23.0.0 <24.0.0", null, true],
    ]);
    expect(skipped).toEqual([
      {
        manifest: "pyproject.toml",
        entry: "mylib",
        reason: "a URL or path, not a registry package",
      },
    ]);
  });

  it("treats a file that is not valid TOML as absent, and says so", async () => {
    const { deps, skipped, all } = await manifestsOf({
      "pyproject.toml": '[project]\ndependencies = ["requests>=2"\nname = "broken\n',
      "requirements.txt": "flask==3.0.0\n",
    });
    expect(deps).toEqual([]);
    expect(skipped).toEqual([
      {
        manifest: "pyproject.toml",
        entry: "(the whole file)",
        reason: expect.stringMatching(/^not valid TOML at line \d+, so read as absent$/),
      },
    ]);
    // The other manifests are still read.
    expect(all.map((d) => d.name)).toEqual(["flask"]);
  });
});
