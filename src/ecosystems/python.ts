import path from "node:path";
import semver from "semver";
import { describeResult, sandboxSettings, VENV_DIR } from "../sandbox/index.js";
import { entryInfo, listDir } from "../workcopy/fs.js";
import {
  containsText,
  isDirectory,
  isFile,
  isTestFile,
  readJson,
  readText,
  relativeTo,
  REPORT_DIR,
  timedOutAttempt,
} from "./kit.js";
import type {
  Check,
  CoverageAttempt,
  CoverageContext,
  CoverageFigures,
  DetectedChecks,
  Ecosystem,
  ManifestFiles,
  Manifests,
  SourceFile,
} from "./types.js";
import { parseRepositoryToml, RepositoryParseError } from "../util/repo-parse.js";

/*
 * Python: pytest as the check, a venv with pip for the setup step's install (requirements
 * files and the project itself, editable), coverage.py around pytest or unittest for coverage, and
 * requirements*.txt and pyproject.toml (`[project] dependencies`, Poetry's dependency
 * tables) as manifests.
 */

export const python: Ecosystem<"python"> = {
  id: "python",
  description: "Python (pytest or unittest; requirements*.txt, pyproject.toml)",
  verify: { detect: detectPython },
  coverage: { languages: ["python"], needsTestFiles: true, measure: pythonCoverage },
  manifests: { registry: "PyPI", advisories: "osv", read: readPython, toSemver: pep440ToSemver },
};

// --- verification -------------------------------------------------------------------------

/** How deep and how wide the search for pytest files under tests/ goes. */
const PYTEST_SEARCH_DEPTH = 3;
const PYTEST_SEARCH_ENTRIES = 2_000;

const PYTEST_CHECK: Check = { name: "pytest", command: "python3 -m pytest -q" };

/** Whether a test_*.py file lies in `dir`, looking a few levels down. */
async function hasPytestFile(workdir: string, dir: string): Promise<boolean> {
  let budget = PYTEST_SEARCH_ENTRIES;
  const queue: Array<{ rel: string; depth: number }> = [{ rel: dir, depth: 0 }];
  while (queue.length > 0 && budget > 0) {
    const next = queue.shift();
    if (!next) break;
    const entries = await listDir(workdir, next.rel);
    if (typeof entries === "string") continue;
    for (const entry of entries) {
      if (--budget < 0) break;
      if (entry.isFile() && /^test_.*\.py$/.test(entry.name)) return true;
      if (
        entry.isDirectory() &&
        next.depth + 1 < PYTEST_SEARCH_DEPTH &&
        !entry.name.startsWith(".") &&
        entry.name !== "__pycache__" &&
        entry.name !== "node_modules"
      ) {
        queue.push({ rel: path.join(next.rel, entry.name), depth: next.depth + 1 });
      }
    }
  }
  return false;
}

/** The file or folder that shows the repository uses pytest, or null. */
async function detectPytest(workdir: string): Promise<string | null> {
  if (await isFile(workdir, "pytest.ini")) return "pytest.ini";
  if (await isFile(workdir, "conftest.py")) return "conftest.py";
  if (await containsText(workdir, "pyproject.toml", "[tool.pytest")) return "pyproject.toml";
  if (await containsText(workdir, "setup.cfg", "[tool:pytest]")) return "setup.cfg";
  if (await containsText(workdir, "tox.ini", "[pytest]")) return "tox.ini";
  for (const dir of ["tests", "test"]) {
    if ((await isDirectory(workdir, dir)) && (await hasPytestFile(workdir, dir))) return `${dir}/`;
  }
  return null;
}

async function detectPython(workdir: string): Promise<DetectedChecks | null> {
  const pytest = await detectPytest(workdir);
  const install = await detectInstall(workdir);
  if (!pytest && !install) return null;
  return {
    source: pytest ?? install!.inputs[0]!,
    checks: pytest ? [PYTEST_CHECK] : [],
    ...(install
      ? {
          install: [{ name: "install", command: install.command }],
          installNotes: install.notes,
          installInputs: install.inputs,
          // Restored from the package cache in place of an install: only where every working
          // copy is /workspace, because a venv's scripts and an editable install name their
          // own absolute path (with SANDBOX=none each working copy has its own).
          installOutputs: sandboxSettings().engine === "bwrap" ? [VENV] : [],
        }
      : {}),
  };
}

// --- installs (the setup step, verify/setup.ts) -------------------------------------------

/**
 * The virtual environment the setup step makes in the working copy. The sandbox puts its
 * bin/ first on PATH of every later command (sandbox/settings.ts, VENV_DIR), so `python3` and
 * `pytest` there are the venv's. Kept out of the diff (pipeline/diff.ts) and the index.
 */
const VENV = VENV_DIR;

/** requirements files installed: the main one and those for development, tests and CI. */
const REQUIREMENTS =
  /^(requirements([-_.](dev|devel|develop|development|test|tests|testing|ci))?\.txt|(dev|test|tests)[-_]requirements\.txt)$/;

/** Extras of the project installed with it: what its tests usually need. */
const TEST_EXTRAS = ["test", "tests", "testing", "dev"];

/** Lockfiles pip cannot read: they key the cache, and a note says they were not applied. */
const OTHER_LOCKFILES = ["uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock"];

/** A word for a POSIX shell, quoted when it needs to be. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}

/**
 * What the setup step runs for a Python repository: a venv (seeing the worker's own
 * packages, so its pytest and coverage.py stay usable), then one `pip install` of the
 * requirements files and of the project itself, editable (with its test extras), so tests
 * import it as an installed package. Null when there is nothing to install or a venv is
 * already there.
 */
async function detectInstall(
  workdir: string,
): Promise<{ command: string; notes: string[]; inputs: string[] } | null> {
  if ((await entryInfo(workdir, VENV)) !== undefined) return null;
  const entries = await listDir(workdir, ".");
  const names =
    typeof entries === "string" ? [] : entries.filter((e) => e.isFile()).map((e) => e.name);
  const requirements = names
    .filter((n) => REQUIREMENTS.test(n))
    .sort((a, b) =>
      a === "requirements.txt" ? -1 : b === "requirements.txt" ? 1 : a.localeCompare(b),
    );
  const args: string[] = requirements.flatMap((r) => ["-r", r]);
  const notes: string[] = [];
  const inputs = [...requirements];
  const declared: string[] = [];
  let pep621 = false;
  let project: string | undefined;
  let doc: TomlTable | undefined;
  if (names.includes(PYPROJECT)) {
    inputs.push(PYPROJECT);
    const text = await readText(workdir, PYPROJECT);
    try {
      doc = typeof text === "string" ? await parseRepositoryToml(text) : undefined;
    } catch {
      notes.push(`${PYPROJECT} is not valid TOML: the project itself is not installed.`);
    }
  }
  const uv = doc ? tableAt(doc, "tool", "uv") : undefined;
  const packaged =
    doc !== undefined &&
    (tableAt(doc, "project") !== undefined ||
      tableAt(doc, "tool", "poetry") !== undefined ||
      tableAt(doc, "build-system") !== undefined);
  if (doc && uv?.package === false) {
    // uv's virtual project: its dependencies, not the project, are installed.
    const deps = tableAt(doc, "project")?.dependencies;
    if (Array.isArray(deps)) args.push(...deps.filter((d) => typeof d === "string"));
  } else if (packaged || names.includes("setup.py") || names.includes("setup.cfg")) {
    for (const name of ["setup.py", "setup.cfg"]) if (names.includes(name)) inputs.push(name);
    const optional = tableAt(doc ?? {}, "project", "optional-dependencies") ?? {};
    const wanted = Object.keys(optional).filter((e) => TEST_EXTRAS.includes(e.toLowerCase()));
    project = wanted.length > 0 ? `.[${wanted.join(",")}]` : ".";
    // What a PEP 621 project declares, for when the project itself cannot be built.
    pep621 = tableAt(doc ?? {}, "project") !== undefined;
    for (const list of [
      tableAt(doc ?? {}, "project")?.dependencies,
      ...wanted.map((e) => optional[e]),
    ])
      if (Array.isArray(list))
        declared.push(...list.filter((d): d is string => typeof d === "string"));
  }
  if (args.length === 0 && project === undefined) return null;
  const locks = OTHER_LOCKFILES.filter((l) => names.includes(l));
  inputs.push(...locks);
  const what = [
    ...(requirements.length > 0 ? [requirements.join(", ")] : []),
    ...(project !== undefined ? ["the project itself (editable)"] : []),
    ...(project === undefined && args.length > requirements.length * 2
      ? [`${PYPROJECT}'s dependencies`]
      : []),
  ];
  notes.unshift(`No ${VENV}: making one and installing ${what.join(" and ")} with pip first.`);
  if (locks.length > 0)
    notes.push(
      `${locks.join(", ")} ${locks.length === 1 ? "is" : "are"} not applied (pip cannot read ${locks.length === 1 ? "it" : "them"}): versions come from ${PYPROJECT}'s ranges. A \`setup:\` list in .github/foreman.yml can run the lock's own tool.`,
    );
  const pip = (words: string[]) =>
    `${VENV}/bin/python -m pip install ${words.map(shellWord).join(" ")}`;
  const steps = [`python3 -m venv --system-site-packages --without-pip ${VENV}`];
  if (args.length > 0) steps.push(pip(args));
  if (project !== undefined && !pep621) steps.push(pip(["-e", project]));
  else if (project !== undefined) {
    // A PEP 621 project pip cannot build (several top-level packages in a flat layout, a
    // build backend that needs more than it declares) still gets what it declares: its
    // tests import it from the working copy, as they did before there was a setup step. A
    // dependency that cannot be fetched fails that second install, and the step with it.
    // (Elsewhere, setup.py or Poetry, what the project needs is known only to its build:
    // its failure fails the step.)
    const fallback = [
      `echo ${shellWord(`foreman: the project itself could not be installed (pip's error above); installing what ${PYPROJECT} declares instead, and the tests import the project from the working copy.`)} >&2`,
      ...(declared.length > 0 ? [pip(declared)] : []),
    ].join(" && ");
    steps.push(`{ ${pip(["-e", project])} || { ${fallback}; }; }`);
  }
  const command = steps.join(" && ");
  return { command, notes, inputs };
}

// --- coverage -----------------------------------------------------------------------------

/** Statement coverage from coverage.py's JSON report (`coverage json`), test files left out. */
export function parseCoveragePyJson(json: unknown, root: string): CoverageFigures | null {
  const filesField = (json as { files?: unknown } | null)?.files;
  if (typeof filesField !== "object" || filesField === null) return null;
  let covered = 0;
  let total = 0;
  let files = 0;
  let excluded = 0;
  for (const [key, value] of Object.entries(
    filesField as Record<
      string,
      { summary?: { covered_lines?: unknown; num_statements?: unknown } }
    >,
  )) {
    const rel = relativeTo(root, key);
    if (rel === null) continue;
    if (isTestFile(rel)) {
      excluded++;
      continue;
    }
    const t = Number(value?.summary?.num_statements);
    const c = Number(value?.summary?.covered_lines);
    if (!Number.isFinite(t) || !Number.isFinite(c)) continue;
    files++;
    total += t;
    covered += c;
  }
  return total > 0 ? { covered, total, files, excluded_test_files: excluded } : null;
}

/**
 * Python interpreters tried for coverage.py: `python3` (the setup step's venv when it made
 * one, sandbox/settings.ts VENV_DIR; else the worker's), then the system's.
 */
export const PYTHON_CANDIDATES = ["python3", "/usr/bin/python3"];

/** Root files that name a repository's test tools: tox, nox, setuptools, requirements. */
const TOOL_FILES =
  /^(tox\.ini|noxfile\.py|setup\.cfg|setup\.py|pyproject\.toml|Pipfile|requirements[\w.-]*\.txt)$/;

/**
 * True when the repository runs its tests with pytest: its configuration (pytest.ini,
 * `[tool.pytest…]`, `[tool:pytest]`, `[pytest]`), conftest.py, pytest named as a test
 * dependency or command at the root (tox `deps`/`commands`, extras, requirements), or test
 * files that import pytest or hold bare `def test_…` functions (which only pytest collects).
 */
export function usesPytest(byPath: ReadonlyMap<string, SourceFile>): boolean {
  for (const [rel, file] of byPath) {
    const name = path.posix.basename(rel);
    if (name === "conftest.py" || name === "pytest.ini") return true;
    if (!rel.includes("/") && /^(pyproject\.toml|setup\.cfg|tox\.ini)$/.test(name))
      if (/^\[(tool\.pytest|tool:pytest|pytest)\b/m.test(file.text)) return true;
    // "pytest", "py.test", "pytest-cov", "pytest>=7" as a word in a tool file at the root.
    if (!rel.includes("/") && TOOL_FILES.test(name) && /(^|[\s"'[,=(])py\.?test\b/m.test(file.text))
      return true;
    if (
      file.test &&
      file.language === "python" &&
      /^(\s*(import pytest|from pytest\b)|(async )?def test_)/m.test(file.text)
    )
      return true;
  }
  return false;
}

/**
 * "src" for a src layout (packages under src/, none of the same name at the root), whose
 * tests import the package as an installed one: tox or pip install it first, the scan puts
 * src/ on PYTHONPATH instead. Null otherwise.
 */
export function srcLayout(byPath: ReadonlyMap<string, SourceFile>): string | null {
  for (const rel of byPath.keys()) {
    const match = /^src\/([A-Za-z_][\w]*)(\/__init__\.py|\.py)$/.exec(rel);
    if (!match || rel === "src/setup.py") continue;
    const name = match[1]!;
    if (!byPath.has(`${name}/__init__.py`) && !byPath.has(`${name}.py`)) return "src";
  }
  return null;
}

async function pythonCoverage(ctx: CoverageContext): Promise<CoverageAttempt> {
  const notes: string[] = [];
  const byPath = ctx.files;
  const pytest = usesPytest(byPath);
  let python: string | null = null;
  let probe = "";
  for (const candidate of PYTHON_CANDIDATES) {
    probe = `${candidate} -c 'import coverage${pytest ? ", pytest" : ""}'`;
    const available = await ctx.run(probe);
    if (!available) return { ok: false, reason: ctx.outOfTime(), command: probe, notes };
    if (available.ok) {
      python = candidate;
      break;
    }
  }
  if (!python)
    return {
      ok: false,
      reason: `coverage.py${pytest ? " and pytest are" : " is"} not installed on this worker (tried ${PYTHON_CANDIDATES.join(", ")})`,
      command: probe,
      notes,
    };
  const root = ctx.root;
  let runner: string;
  if (pytest) runner = "-m pytest -q -p no:cacheprovider";
  else {
    // unittest discovers only packages below its start folder: a tests folder without
    // __init__.py is started from directly.
    const dir = ["tests", "test"].find((d) =>
      [...byPath.keys()].some((p) => p.startsWith(`${d}/`) && p.endsWith(".py")),
    );
    runner =
      dir && !byPath.has(`${dir}/__init__.py`)
        ? `-m unittest discover -s ${dir}`
        : "-m unittest discover";
  }
  const data = `${REPORT_DIR}/python.coverage`;
  const json = `${REPORT_DIR}/python-coverage.json`;
  const command = `mkdir -p ${REPORT_DIR} && ${python} -m coverage run ${runner}`;
  const src = srcLayout(byPath);
  // Python makes PYTHONPATH entries absolute at start, so a relative "src" survives a chdir.
  const env: Record<string, string> = {
    PYTHONDONTWRITEBYTECODE: "1",
    COVERAGE_FILE: data,
    ...(src ? { PYTHONPATH: src } : {}),
  };
  const result = await ctx.run(command, env);
  if (!result) return { ok: false, reason: ctx.outOfTime(), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  const report = await ctx.run(`${python} -m coverage json -q -o ${json}`, env);
  const figures = report?.ok
    ? parseCoveragePyJson(await readJson(root, json), ctx.sandboxRoot)
    : null;
  if (!figures)
    return {
      ok: false,
      reason: `coverage.py wrote no report (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`The tests failed (${describeResult(result)}); coverage is from that run.`);
  if (src) notes.push(`A src layout: ${src}/ was put on PYTHONPATH in place of an install.`);
  const venv = await isDirectory(root, VENV);
  if (ctx.setupFailure)
    notes.push(`The dependencies are not installed (tests needing them fail): ${ctx.setupFailure}`);
  else if (venv && python === PYTHON_CANDIDATES[0])
    notes.push(`The tests ran in the setup step's ${VENV}, with the dependencies it installed.`);
  else if (venv)
    notes.push(
      `The setup step's ${VENV} has no coverage.py${pytest ? " or pytest" : ""}: ${python} ran the tests without its dependencies; tests needing them fail.`,
    );
  return {
    ok: true,
    figures,
    unit: "statements",
    command,
    method: `coverage.py around ${pytest ? "pytest" : "unittest"}`,
    testsPassed: result.ok,
    notes,
  };
}

// --- manifests ----------------------------------------------------------------------------

/** A PEP 440 version as semver (release numbers only; pre/post/local parts dropped). */
export function pep440ToSemver(version: string): string | null {
  const match = /^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version);
  if (!match) return null;
  return `${match[1]}.${match[2] ?? 0}.${match[3] ?? 0}`;
}

/** A PEP 440 specifier set (">=1.2,<2", "==1.4.2", "~=1.4") as a semver range, or null. */
export function pep440Range(spec: string): { range: string; exact: string | null } | null {
  const parts = spec
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) return { range: "*", exact: null };
  const ranges: string[] = [];
  let exact: string | null = null;
  for (const part of parts) {
    const match = /^(===|==|~=|>=|<=|!=|>|<)\s*([^\s;]+)$/.exec(part);
    if (!match) return null;
    const [, op, raw] = match;
    if (op === undefined || raw === undefined) return null;
    if (op === "!=") continue;
    if (raw.endsWith(".*")) {
      // ==1.* and ==1.4.* (prefix matching)
      const prefix = raw.slice(0, -2);
      const version = pep440ToSemver(prefix);
      if (!version || (op !== "==" && op !== "!=")) return null;
      const [major, minor] = version.split(".");
      ranges.push(prefix.split(".").length === 1 ? `${major}.x` : `~${major}.${minor}.0`);
      continue;
    }
    const version = pep440ToSemver(raw);
    if (!version) return null;
    if (op === "==" || op === "===") {
      ranges.push(version);
      exact = raw;
    } else if (op === "~=") {
      // ~=X.Y means >=X.Y,==X.*; ~=X.Y.Z means >=X.Y.Z,==X.Y.*
      const segments = raw.split(".").length;
      const [major, minor] = version.split(".");
      ranges.push(
        segments <= 2
          ? `>=${version} <${Number(major) + 1}.0.0`
          : `>=${version} <${major}.${Number(minor) + 1}.0`,
      );
    } else ranges.push(`${op}${version}`);
  }
  const range = semver.validRange(ranges.join(" ") || "*");
  return range === null ? null : { range, exact };
}

const PY_REQUIREMENT = /^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;#]*)/;

function addPython(out: Manifests, manifest: string, entry: string, dev: boolean): void {
  const line = entry.trim();
  if (line === "" || line.startsWith("#") || line.startsWith("-")) return;
  if (/:\/\/|^\.|^\//.test(line)) {
    out.skipped.push({
      manifest,
      entry: line.slice(0, 100),
      reason: "a URL or path, not a registry package",
    });
    return;
  }
  const match = PY_REQUIREMENT.exec(line);
  if (!match) {
    out.skipped.push({ manifest, entry: line.slice(0, 100), reason: "not understood" });
    return;
  }
  const name = match[1]!;
  const spec = match[2]!.trim().replace(/^\((.*)\)$/, "$1");
  addDependency(out, manifest, name, spec, pep440Range(spec), dev);
}

/** Records one declared dependency, or why its version specifier was not understood. */
function addDependency(
  out: Manifests,
  manifest: string,
  name: string,
  spec: string,
  parsed: { range: string; exact: string | null } | null,
  dev: boolean,
): void {
  if (!parsed) {
    out.skipped.push({
      manifest,
      entry: name,
      reason: `version specifier "${spec}" not understood`,
    });
    return;
  }
  out.dependencies.push({
    ecosystem: "PyPI",
    name,
    declared: spec || "(any)",
    range: parsed.range,
    exact: parsed.exact,
    manifest,
    dev,
  });
}

async function readPython(_root: string, repo: ManifestFiles, out: Manifests): Promise<void> {
  for (const file of repo.files) {
    if (!/^requirements([-_.][\w.-]+)?\.txt$/.test(file.path)) continue;
    const dev = /dev|test/i.test(file.path);
    for (const line of file.lines) addPython(out, file.path, line.replace(/\s#.*$/, ""), dev);
  }
  const pyproject = repo.files.find((f) => f.path === "pyproject.toml")?.text;
  if (pyproject !== undefined) await readPyproject(pyproject, out);
}

type TomlTable = Record<string, unknown>;

function isTable(value: unknown): value is TomlTable {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The table at a key path of a parsed TOML document, or undefined. */
function tableAt(doc: TomlTable, ...keys: string[]): TomlTable | undefined {
  let at: unknown = doc;
  for (const key of keys) at = isTable(at) && Object.hasOwn(at, key) ? at[key] : undefined;
  return isTable(at) ? at : undefined;
}

const PYPROJECT = "pyproject.toml";

/*
 * pyproject.toml with a real TOML parser (smol-toml: small, no dependencies, TOML 1.0
 * compliant), so multi-line arrays, inline tables, dotted keys and comments holding
 * brackets read as Python's own tools read them. A file that is not valid TOML is treated
 * as absent (pip and Poetry refuse it too), and the manifest's skipped list says so.
 */
async function readPyproject(text: string, out: Manifests): Promise<void> {
  let doc: TomlTable;
  try {
    doc = await parseRepositoryToml(text);
  } catch (error) {
    const where =
      error instanceof RepositoryParseError && error.line !== undefined
        ? ` at line ${error.line}`
        : "";
    out.skipped.push({
      manifest: PYPROJECT,
      entry: "(the whole file)",
      reason: `not valid TOML${where}, so read as absent`,
    });
    return;
  }
  // PEP 621: `[project] dependencies`, an array of PEP 508 requirement strings.
  const requirements = tableAt(doc, "project")?.dependencies;
  if (Array.isArray(requirements))
    for (const item of requirements)
      if (typeof item === "string") addPython(out, PYPROJECT, item, false);
  // Poetry: `[tool.poetry.dependencies]`, and for development the old
  // `[tool.poetry.dev-dependencies]` and `[tool.poetry.group.<name>.dependencies]`.
  const poetry = tableAt(doc, "tool", "poetry");
  if (!poetry) return;
  addPoetryTable(out, tableAt(poetry, "dependencies"), false);
  addPoetryTable(out, tableAt(poetry, "dev-dependencies"), true);
  for (const group of Object.values(tableAt(poetry, "group") ?? {}))
    if (isTable(group)) addPoetryTable(out, tableAt(group, "dependencies"), true);
}

function addPoetryTable(out: Manifests, table: TomlTable | undefined, dev: boolean): void {
  for (const [name, value] of Object.entries(table ?? {})) {
    // The interpreter the project supports, not a package.
    if (name.toLowerCase() === "python") continue;
    const spec = typeof value === "string" ? value : isTable(value) ? value.version : undefined;
    if (isTable(value) && ["git", "path", "url"].some((k) => Object.hasOwn(value, k))) {
      out.skipped.push({
        manifest: PYPROJECT,
        entry: name,
        reason: "a URL or path, not a registry package",
      });
    } else if (typeof spec === "string" || (isTable(value) && spec === undefined)) {
      const declared = (spec ?? "").trim();
      addDependency(out, PYPROJECT, name, declared, poetryRange(declared), dev);
    } else {
      // An array of constraints by Python version or platform, or an odd value.
      out.skipped.push({ manifest: PYPROJECT, entry: name, reason: "not understood" });
    }
  }
}

/**
 * A Poetry version constraint as a semver range: `^1.2` and `~1.2` mean what they mean in
 * semver, a bare version is exact, and anything else is read as PEP 440 (`>=1.2,<2`).
 */
function poetryRange(spec: string): { range: string; exact: string | null } | null {
  const s = spec.trim();
  if (s === "" || s === "*") return { range: "*", exact: null };
  const caretOrTilde = /^([\^~])\s*(\d+(?:\.\d+){0,2})$/.exec(s);
  if (caretOrTilde) {
    const range = semver.validRange(`${caretOrTilde[1]}${caretOrTilde[2]}`);
    return range === null ? null : { range, exact: null };
  }
  return pep440Range(/^\d/.test(s) ? `==${s}` : s);
}
