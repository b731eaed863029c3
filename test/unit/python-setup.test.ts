import { execFile } from "node:child_process";
import { mkdir, mkdtemp, symlink, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureCoverage } from "../../src/health/coverage.js";
import { readRepoFiles } from "../../src/health/files.js";
import { excludeBuildOutput } from "../../src/pipeline/diff.js";
import { detectChecks } from "../../src/verify/checks.js";
import { configureSandbox, runSandboxed } from "../../src/sandbox/index.js";
import { configureSandboxCaches } from "../../src/sandbox/cache.js";
import { detectSetup, runSetup, type SetupOutcome } from "../../src/verify/setup.js";
import { startFakePypi, type FakePypi } from "../helpers/pypi-fake.js";

/*
 * The setup step for a Python repository, for real: bubblewrap, tinyproxy's allowlist, pip
 * and a venv in the working copy. PyPI is not reachable from CI, so the index is a local
 * fake (test/helpers/pypi-fake.ts) named in PIP_INDEX_URL, its host put on the allowlist.
 * The repository needs a dependency from that index (requirements.txt) and its own package
 * installed (src layout, pyproject.toml with an in-tree PEP 660 backend, so the editable
 * install needs nothing from an index either).
 */

/** An in-tree build backend: an editable wheel whose .pth puts src/ on sys.path. */
const BACKEND = String.raw`import base64, hashlib, os, zipfile

NAME, VERSION = "calc", "0.1"


def _digest(text):
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    files = {
        "calc.pth": os.path.abspath("src") + "\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{p},sha256={_digest(t)},{len(t.encode())}" for p, t in files.items()]
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("editable only")


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("editable only")
`;

const FILES: Record<string, string> = {
  "requirements.txt": "foreman-dep==1.0\n",
  "pyproject.toml": `[build-system]
requires = []
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "calc"
version = "0.1"
`,
  "_build/backend.py": BACKEND,
  "src/calc/__init__.py": "from foreman_dep import VALUE\n\n\ndef answer():\n    return VALUE\n",
};

/** What a check runs after setup: the project, which needs the dependency. */
const CHECK = `python3 -c 'import calc, sys; print("answer", calc.answer(), sys.prefix)'`;

const execFileAsync = promisify(execFile);

let root: string;
let pypi: FakePypi;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), "foreman-python-setup-"));
  pypi = await startFakePypi([
    { name: "foreman-dep", version: "1.0", module: "foreman_dep", source: "VALUE = 42\n" },
  ]);
  // The fake index is on the host's loopback: an operator's SANDBOX_SETUP_ALLOW_ADDRESSES.
  configureSandbox({ setupAddresses: { allowRanges: ["127.0.0.0/8"], ownPorts: [] } });
  configureSandboxCaches({ root: path.join(root, "caches") });
}, 60_000);

/** The fake index on the allowlist: its host and port (plain HTTP, not 443). */
const index = () => new URL(pypi.indexUrl).host;

afterAll(async () => {
  configureSandbox({});
  configureSandboxCaches({});
  await pypi?.close();
  await rm(root, { recursive: true, force: true });
});

/** A fresh working copy (a git repository) of `files`. */
async function workingCopy(name: string, files: Record<string, string>): Promise<string> {
  const dir = path.join(root, name);
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), text);
  }
  await execFileAsync("git", ["init", "-q"], { cwd: dir });
  await execFileAsync("git", ["add", "-A"], { cwd: dir });
  await execFileAsync(
    "git",
    ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "init"],
    { cwd: dir },
  );
  return dir;
}

const owner = { account: "acct-py", repo: "ws/calc" };

async function setup(
  workdir: string,
  allow: string[],
): Promise<{ outcome: SetupOutcome; logs: string[] }> {
  const logs: string[] = [];
  const outcome = await runSetup({
    workdir,
    owner,
    allow,
    timeoutMs: 120_000,
    env: { PIP_INDEX_URL: pypi.indexUrl },
    log: (line) => void logs.push(line),
  });
  return { outcome, logs };
}

describe("the setup step for Python", () => {
  it("plans a venv, the requirements and the project itself, editable", async () => {
    const dir = await workingCopy("plan", {
      ...FILES,
      "requirements-dev.txt": "pytest\n",
      "requirements-docs.txt": "sphinx\n",
      "poetry.lock": "# pins\n",
      "pyproject.toml": `${FILES["pyproject.toml"]}\n[project.optional-dependencies]\ntest = ["pytest"]\ndocs = ["sphinx"]\n`,
    });
    const plan = await detectSetup(dir);
    expect(plan.steps).toEqual([
      {
        name: "install",
        command:
          "python3 -m venv --system-site-packages --without-pip .venv && .venv/bin/python -m pip install -r requirements.txt -r requirements-dev.txt && { .venv/bin/python -m pip install -e '.[test]' || { echo 'foreman: the project itself could not be installed (pip'\\''s error above); installing what pyproject.toml declares instead, and the tests import the project from the working copy.' >&2 && .venv/bin/python -m pip install pytest; }; }",
      },
    ]);
    expect(plan.inputs).toEqual([
      "requirements.txt",
      "requirements-dev.txt",
      "pyproject.toml",
      "poetry.lock",
    ]);
    expect(plan.outputs).toEqual([".venv"]);
    expect(plan.notes[0]).toBe(
      "No .venv: making one and installing requirements.txt, requirements-dev.txt and the project itself (editable) with pip first.",
    );
    expect(plan.notes[1]).toMatch(/^poetry\.lock is not applied \(pip cannot read it\)/);
  });

  it("names no Python check a makefile stands in for when Python only installs", async () => {
    const dir = await workingCopy("umbrella", {
      "requirements.txt": "foreman-dep==1.0\n",
      Makefile: "test:\n\techo ok\n",
    });
    const plan = await detectChecks(dir);
    expect(plan.checks).toEqual([{ name: "make test", command: "make test" }]);
    expect(plan.notes).toEqual([]);
    expect((await detectSetup(dir)).steps).toHaveLength(1);
  });

  it("installs through the allowlist, runs checks offline in the venv, reuses the cache, and names a refused host", async () => {
    const first = await workingCopy("first", FILES);
    const { outcome, logs } = await setup(first, ["pypi.org", "files.pythonhosted.org", index()]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.ok).toBe(true);
    expect(outcome.fromCache).toBe(false);
    // Through the proxy: the index page and the wheel came from the fake index.
    expect(logs).toContain("Setup: downloaded from 127.0.0.1.");
    expect(pypi.requests).toEqual([
      "/simple/foreman-dep/",
      "/files/foreman_dep-1.0-py3-none-any.whl",
    ]);
    expect(logs).toContain("Setup: saved the package cache for later tasks of this repository.");

    // A check after setup: the default network (none), the venv on PATH, both imports work.
    const check = await runSandboxed(CHECK, {
      cwd: first,
      timeoutMs: 60_000,
      ...(outcome.cache ? { cache: outcome.cache } : {}),
    });
    expect(check.output).toContain("answer 42 /workspace/.venv");
    expect(check.ok).toBe(true);
    // ...and it cannot reach the index itself.
    const offline = await runSandboxed(
      `python3 -m pip download --no-deps --retries 0 --timeout 3 -d /tmp/x -i ${pypi.indexUrl} foreman-dep`,
      { cwd: first, timeoutMs: 60_000 },
    );
    expect(offline.ok).toBe(false);
    expect(pypi.requests).toHaveLength(2);

    // The venv and the editable install's metadata never reach a diff.
    await excludeBuildOutput(first);
    const status = await execFileAsync("git", ["status", "--porcelain", "--untracked-files=all"], {
      cwd: first,
    });
    expect(status.stdout).toBe("");

    // A second working copy of the same files: the venv comes from the cache, no index asked.
    const second = await workingCopy("second", FILES);
    const again = await setup(second, ["pypi.org", index()]);
    expect(again.outcome.ok).toBe(true);
    expect(again.outcome.fromCache).toBe(true);
    expect(
      again.logs.some((l) =>
        /^Setup: no registry was contacted: \.venv restored from the package cache/.test(l),
      ),
    ).toBe(true);
    expect(pypi.requests).toHaveLength(2);
    const secondCheck = await runSandboxed(CHECK, {
      cwd: second,
      timeoutMs: 60_000,
      ...(again.outcome.cache ? { cache: again.outcome.cache } : {}),
    });
    expect(secondCheck.output).toContain("answer 42 /workspace/.venv");

    // Other requirements (a new cache key) with the index's host off the list: refused by name.
    const third = await workingCopy("third", {
      ...FILES,
      "requirements.txt": "foreman-dep>=1.0\n",
    });
    const refused = await setup(third, ["pypi.org", "files.pythonhosted.org"]);
    expect(refused.outcome.ok).toBe(false);
    expect(refused.outcome.refused).toEqual(["127.0.0.1"]);
    expect(refused.outcome.error).toMatch(
      /It asked for `127\.0\.0\.1`, refused because that host is not on SANDBOX_SETUP_ALLOW \(now pypi\.org,files\.pythonhosted\.org\)\. If the repository may download from it, add it to SANDBOX_SETUP_ALLOW\./,
    );
    expect(pypi.requests).toHaveLength(2);
    expect(await readFile(path.join(third, "requirements.txt"), "utf8")).toContain(">=1.0");
  }, 240_000);
});

describe("a project pip cannot build", () => {
  it("still gets what its pyproject.toml declares, and a setup.py project's failure fails the step", async () => {
    const broken = {
      ...FILES,
      "requirements.txt": undefined,
      "_build/backend.py": `def build_editable(*args, **kwargs):\n    raise RuntimeError("Multiple top-level packages discovered in a flat-layout")\n`,
      "pyproject.toml": FILES["pyproject.toml"]!.replace(
        'version = "0.1"',
        'version = "0.1"\ndependencies = ["foreman-dep==1.0"]',
      ),
    };
    const dir = await workingCopy(
      "flat",
      Object.fromEntries(Object.entries(broken).filter(([, t]) => t !== undefined)) as Record<
        string,
        string
      >,
    );
    const { outcome, logs } = await setup(dir, [index()]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.ok).toBe(true);
    expect(logs.join("\n")).toMatch(/the project itself could not be installed/);
    const check = await runSandboxed(
      `python3 -c 'import foreman_dep, sys; print("value", foreman_dep.VALUE, sys.prefix)'`,
      { cwd: dir, timeoutMs: 60_000, ...(outcome.cache ? { cache: outcome.cache } : {}) },
    );
    expect(check.output).toContain("value 42 /workspace/.venv");

    // No PEP 621 table: what the project needs is known only to its build, so its failure
    // fails the step (and says so).
    const legacy = await workingCopy("legacy", {
      "setup.py": "raise SystemExit('this setup.py cannot build here')\n",
    });
    expect((await detectSetup(legacy)).steps[0]!.command).not.toContain("||");
    const failed = await setup(legacy, [index()]);
    expect(failed.outcome.ok).toBe(false);
    expect(failed.outcome.error).toMatch(/^The setup step failed/);
  }, 180_000);
});

describe("a health scan after the Python setup step", () => {
  let saved: string | undefined;
  let shim: string;

  beforeAll(async () => {
    // The venv sees its base's packages: a base with coverage.py and pytest (Debian's, which
    // scripts/setup.sh installs) is put first on PATH, as on the service's container image.
    // Not under /tmp: the sandbox's own /tmp covers it.
    saved = process.env.PATH;
    shim = await mkdtemp("/var/tmp/foreman-python-setup-");
    const bin = path.join(shim, "bin");
    await mkdir(bin, { recursive: true });
    await symlink("/usr/bin/python3", path.join(bin, "python3"));
    process.env.PATH = `${bin}:${saved ?? ""}`;
  });

  afterAll(async () => {
    process.env.PATH = saved;
    await rm(shim, { recursive: true, force: true });
  });

  it("measures coverage with the dependencies installed", async () => {
    const dir = await workingCopy("scanned", {
      ...FILES,
      // Another key than the tests above: their venv has another base.
      "requirements.txt": "# for the scan\nforeman-dep==1.0\n",
      "tests/test_calc.py": "import calc\n\n\ndef test_answer():\n    assert calc.answer() == 42\n",
    });
    const { outcome } = await setup(dir, [index()]);
    expect(outcome.error).toBeUndefined();
    const result = await measureCoverage(await readRepoFiles(dir), {
      root: dir,
      timeoutMs: 120_000,
      ...(outcome.cache ? { cache: outcome.cache } : {}),
    });
    expect(result.measured).toBe(true);
    const language = (result.details.languages as Array<Record<string, unknown>>)[0]!;
    // src/calc/__init__.py: 3 statements, all run; without foreman_dep the import fails.
    expect(language).toMatchObject({
      language: "python",
      method: "coverage.py around pytest",
      covered: 3,
      total: 3,
      tests_passed: true,
    });
    expect(language.notes).toContain(
      "The tests ran in the setup step's .venv, with the dependencies it installed.",
    );
  }, 180_000);
});
