/*
 * Health figures against the tools people trust (issue 19), on real repositories.
 *
 * HEALTH_BENCH_REPOS=/path/a,/path/b names working copies of public repositories, their
 * dependencies installed (npm install / nothing for Python and Go here). Each is scanned by
 * the service's own metric code, in place (coverage runs write their reports into the
 * copy), in the sandbox as the service configures it (SANDBOX, SANDBOX_NETWORK, ...), and
 * each figure is printed beside the reference tool's, run by this benchmark outside it.
 * Repositories whose tests download what they need (Go modules) are measured only with
 * SANDBOX_NETWORK=public, as for the service: under the default `none` their coverage is
 * an estimate.
 *
 *
 *   coverage       JS: the repository's nyc/c8 coverage script, else its own jest or vitest
 *                  (with a coverage provider) run directly with --coverage when the test
 *                  script runs it, else c8 around `npm test`; the tool's own json-summary
 *                  `total` (which counts what the tool counts);
 *                  Python: coverage.py around pytest (when the repository uses it) or
 *                  unittest, src/ on PYTHONPATH for a src layout (as tox would install
 *                  it), `coverage json` totals without test files; Go: `go tool cover
 *                  -func` total (statements, over every package).
 *   documentation  On the files the service counts as public API (isApiFile), read by
 *                  tools other than the service's parsers: JS/TS: TypeDoc with
 *                  typedoc-plugin-coverage (devDependencies; kinds as the service counts
 *                  them, and the service's public API scope set by the benchmark's own
 *                  TypeDoc plugin bench/lib/typedoc-public-api.mjs: no `_` names, no
 *                  CommonJS re-exports or aliases, see referenceJsDocs); Go: `go doc
 *                  -all` per package, its output counted per exported name
 *                  (goDocCounts); Python: the modules' objects
 *                  imported and asked for `__doc__` (runtime introspection, independent of
 *                  the ast reader). Several languages are summed; one failing gives none.
 *   freshness      npm: `npm outdated --json` entries whose latest is newer than wanted
 *                  (direct deps; not a range ahead of latest), with the machine's
 *                  release-age window switched off (--min-release-age=0: the service
 *                  reads no npm config) and the Node version of the scan; Go: `go list -m -u -json all`, modules with an
 *                  Update that go.mod requires directly (not `// indirect`), the set the
 *                  service reads; Python: no reference (`pip list --outdated` needs PyPI,
 *                  which this machine cannot reach, and lists an environment, not the
 *                  repository's declared dependencies), shown as n/a.
 *   duplication    the `jscpd` CLI with its defaults on the same source files.
 *
 * Targets: coverage and documentation within 5 points of the reference, equal dependency
 * counts. Without HEALTH_BENCH_REPOS the benchmark says so and reports nothing.
 */
import { execFile } from "node:child_process";
import { access, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import semver from "semver";
import { loadConfig } from "../src/config/env.js";
import { findCoverageScript, measureCoverage, serviceC8 } from "../src/health/coverage.js";
import { findExports, isApiFile } from "../src/health/documentation.js";
import { codeFiles, readRepoFiles, type RepoFiles } from "../src/health/files.js";
import { measureFreshness } from "../src/health/freshness.js";
import { readManifests } from "../src/health/manifests.js";
import { RegistryClient } from "../src/health/registry.js";
import { measureTechDebt } from "../src/health/tech-debt.js";
import { srcLayout, usesPytest } from "../src/ecosystems/python.js";
import { configureSandbox } from "../src/sandbox/index.js";
import type { BenchReport, Benchmark, Check } from "./lib/harness.js";

const exec = promisify(execFile);
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");

async function sh(
  command: string,
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ ok: boolean; stdout: string }> {
  try {
    const { stdout } = await exec("sh", ["-c", command], {
      cwd,
      env: { ...process.env, CI: "true", ...env },
      maxBuffer: 256 * 1024 * 1024,
      timeout: 900_000,
    });
    return { ok: true, stdout };
  } catch (error) {
    return { ok: false, stdout: String((error as { stdout?: string }).stdout ?? "") };
  }
}

async function readJson(file: string): Promise<unknown> {
  return JSON.parse(await readFile(file, "utf8")) as unknown;
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

const round = (n: number | null) => (n === null ? null : Math.round(n * 10) / 10);

/** Coverage by the reference tool itself, in percent, and how it was run. */
async function referenceCoverage(
  root: string,
  repo: RepoFiles,
): Promise<{ percent: number | null; tool: string }> {
  const has = (p: string) => repo.files.some((f) => f.path === p);
  const bin = path.join(root, "node_modules", ".bin");
  const env = { PATH: `${bin}:${process.env.PATH ?? ""}` };
  if (has("package.json")) {
    const out = await mkdtemp(path.join(os.tmpdir(), "bench-cov-"));
    try {
      const pkg = JSON.parse(repo.files.find((f) => f.path === "package.json")!.text) as {
        scripts?: Record<string, string>;
      };
      const own = findCoverageScript(pkg.scripts ?? {});
      const test = pkg.scripts?.test ?? "";
      const vitestProvider =
        (await exists(path.join(root, "node_modules/@vitest/coverage-v8"))) ||
        (await exists(path.join(root, "node_modules/@vitest/coverage-istanbul")));
      let tool: string;
      if (!own && /(^|[\s;&|(/])jest(?=\s|$)/.test(test)) {
        // The repository's own coverage run: jest with its own configuration, run directly
        // (a test script's other steps, such as time-zone reruns, measure nothing more).
        await sh(
          `jest --coverage --coverageReporters=json-summary --coverageDirectory=${out}`,
          root,
          env,
        );
        tool = "jest --coverage";
      } else if (!own && /(^|[\s;&|(/])vitest(?=\s|$)/.test(test) && vitestProvider) {
        await sh(
          `vitest run --coverage.enabled=true --coverage.reporter=json-summary --coverage.reportsDirectory=${out}`,
          root,
          env,
        );
        tool = "vitest run --coverage";
      } else if (own) {
        // The tool's own run, then its own report of that run as JSON.
        await sh(`npm run ${own.name}`, root, env);
        await sh(`${own.tool} report --reporter=json-summary --report-dir=${out}`, root, env);
        tool = `${own.tool} (npm run ${own.name})`;
      } else {
        await sh(
          `node ${serviceC8()} --reporter=json-summary --report-dir=${out} npm test`,
          root,
          env,
        );
        tool = "c8 npm test";
      }
      const summary = (await readJson(path.join(out, "coverage-summary.json")).catch(
        () => null,
      )) as { total?: { lines?: { pct?: number } } } | null;
      return { percent: summary?.total?.lines?.pct ?? null, tool };
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }
  if (has("go.mod")) {
    const profile = path.join(os.tmpdir(), `bench-go-${process.pid}.out`);
    await sh(`go test -coverprofile=${profile} ./...`, root, { GOFLAGS: "-mod=mod" });
    const func = await sh(`go tool cover -func=${profile}`, root);
    await rm(profile, { force: true });
    const total = /^total:\s+\(statements\)\s+([\d.]+)%/m.exec(func.stdout);
    return { percent: total ? Number(total[1]) : null, tool: "go tool cover -func" };
  }
  if (repo.files.some((f) => f.language === "python")) {
    const python = "/usr/bin/python3";
    const byPath = new Map(repo.files.map((f) => [f.path, f]));
    const pytest = usesPytest(byPath);
    const src = srcLayout(byPath);
    const out = path.join(os.tmpdir(), `bench-py-${process.pid}.json`);
    const data = path.join(os.tmpdir(), `bench-py-${process.pid}.coverage`);
    await sh(`${python} -m coverage run -m ${pytest ? "pytest -q" : "unittest discover"}`, root, {
      COVERAGE_FILE: data,
      ...(src ? { PYTHONPATH: src } : {}),
    });
    await sh(
      `${python} -m coverage json -q -o ${out} --include='${root}/*' --omit='${root}/tests/*,${root}/test/*,*/test_*.py,*/conftest.py'`,
      root,
      { COVERAGE_FILE: data },
    );
    const json = (await readJson(out).catch(() => null)) as {
      totals?: { percent_covered?: number };
    } | null;
    await rm(out, { force: true });
    await rm(data, { force: true });
    return {
      percent: json?.totals?.percent_covered ?? null,
      tool: `coverage.py ${pytest ? "pytest" : "unittest"}${src ? " (src layout)" : ""}`,
    };
  }
  return { percent: null, tool: "none" };
}

/** Python public functions/classes with a docstring, by importing the package. */
async function referencePythonDocs(root: string, repo: RepoFiles): Promise<DocCount | null> {
  const src = srcLayout(new Map(repo.files.map((f) => [f.path, f])));
  const packages = [
    ...new Set(
      repo.files
        .filter((f) => isApiFile(f) && f.language === "python" && f.path.endsWith("/__init__.py"))
        .map((f) => (src ? f.path.replace(/^src\//, "") : f.path).split("/")[0]!),
    ),
  ];
  if (packages.length === 0) return null;
  const script = `
import importlib, inspect, json, pkgutil, sys
sys.path.insert(0, ${JSON.stringify(src ?? ".")})
total = documented = 0
for name in ${JSON.stringify(packages)}:
    pkg = importlib.import_module(name)
    mods = [pkg] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(pkg.__path__, name + ".") if not any(p.startswith("_") for p in m.name.split(".")[1:])]
    for mod in mods:
        public = getattr(mod, "__all__", None)
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or (public is not None and attr not in public): continue
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or obj.__module__ != mod.__name__: continue
            items = [obj] + ([m for n, m in vars(obj).items() if not n.startswith("_") and inspect.isfunction(m)] if inspect.isclass(obj) else [])
            for item in items:
                total += 1
                documented += bool(item.__doc__ and item.__doc__.strip())
print(json.dumps([documented, total]))
`;
  const result = await exec("/usr/bin/python3", ["-c", script], { cwd: root }).catch(
    (error: unknown) => {
      console.log(`health-accuracy: Python docs reference failed: ${String(error).slice(0, 300)}`);
      return null;
    },
  );
  if (!result) return null;
  const [documented, total] = JSON.parse(result.stdout) as [number, number];
  return { documented, total, tool: "python __doc__" };
}

interface DocCount {
  documented: number;
  total: number;
  tool: string;
}

/*
 * Documentation references. Each reads the same files the service counts as public API
 * (documentation.ts isApiFile: not examples, tests, fixtures, tooling), so that the file
 * selection is shared and the parsing and counting are the reference tool's own.
 */

/**
 * JavaScript/TypeScript: TypeDoc (its own TypeScript program, JSDoc for JavaScript through
 * allowJs, so CommonJS `module.exports`/`exports.x` and `obj.method = function` are read
 * as TypeScript's checker sees them) with typedoc-plugin-coverage, which counts, as
 * TypeDoc's own `validation.notDocumented` does, the reflections of the kinds in
 * `requiredToBeDocumented` and writes documented/total to a coverage.json. The kinds are
 * set to those the service counts: enums, variables, functions, classes, interfaces, type
 * aliases, namespaces, and methods and accessors of classes and objects (TypeDoc's default
 * also requires properties and enum members; the service counts neither interface members
 * nor fields nor enum members). `@private`, `@internal`, `@hidden`, private and protected
 * members are left out (excludePrivate/Protected/Internal). The rest of the service's
 * definition of public API, which TypeDoc has no option for, is set by a plugin of this
 * benchmark, bench/lib/typedoc-public-api.mjs, that removes before counting: names starting
 * with `_` and `@api private` symbols; CommonJS re-exports and aliases (`module.exports =
 * require(…)`, `exports.json = bodyParser.json`, the inner names of `res.contentType =
 * res.type = function …`), which the service counts once where they are defined, or not at
 * all when another package defines them; `@typedef {import("./x").X} X` type imports; and
 * `this.x = …` fields, which TypeDoc makes methods when they hold a function. This is the
 * reference's scope only: which symbols are documented is TypeDoc's own reading (its
 * comments, and docs inherited from implemented interfaces and base classes). What still
 * differs, and is the tools' difference: overloads need a doc on the implementation or each
 * signature; the service reads inherited docs only from types of the repository (same file,
 * or imported by name from a relative path) and the standard library's globals (no type
 * checker), TypeDoc from any.
 */
async function referenceJsDocs(root: string, files: string[]): Promise<DocCount | null> {
  if (files.length === 0) return null;
  const typedoc = path.join(ROOT, "node_modules", ".bin", "typedoc");
  if (!(await exists(typedoc))) {
    console.log(
      "health-accuracy: TypeDoc is not installed (npm install in the project); JS docs reference skipped.",
    );
    return null;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "bench-typedoc-"));
  try {
    const entries = files.map((f) => path.join(root, f));
    const typeRoots = path.join(root, "node_modules", "@types");
    await writeFile(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          allowJs: true,
          checkJs: false,
          noEmit: true,
          skipLibCheck: true,
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          ...((await exists(typeRoots)) ? { typeRoots: [typeRoots] } : {}),
        },
        files: entries,
      }),
    );
    await writeFile(
      path.join(dir, "typedoc.json"),
      JSON.stringify({
        entryPoints: entries,
        entryPointStrategy: "expand",
        tsconfig: path.join(dir, "tsconfig.json"),
        skipErrorChecking: true,
        excludePrivate: true,
        excludeProtected: true,
        excludeInternal: true,
        requiredToBeDocumented: [
          "Enum",
          "Variable",
          "Function",
          "Class",
          "Interface",
          "TypeAlias",
          "Namespace",
          "Method",
          "Accessor",
        ],
        plugin: [
          "typedoc-plugin-coverage",
          path.join(ROOT, "bench", "lib", "typedoc-public-api.mjs"),
        ],
        coverageOutputType: "json",
        coverageOutputPath: path.join(dir, "coverage.json"),
        outputs: [{ name: "json", path: path.join(dir, "typedoc.json.out") }],
        logLevel: "Error",
      }),
    );
    await exec(typedoc, ["--options", path.join(dir, "typedoc.json")], {
      cwd: root,
      maxBuffer: 64 * 1024 * 1024,
      timeout: 900_000,
    }).catch((error: unknown) =>
      console.log(
        `health-accuracy: TypeDoc: ${String((error as { stdout?: string }).stdout ?? error).slice(0, 500)}`,
      ),
    );
    const coverage = (await readJson(path.join(dir, "coverage.json")).catch(() => null)) as {
      expected?: number;
      actual?: number;
    } | null;
    if (!coverage || typeof coverage.expected !== "number" || typeof coverage.actual !== "number")
      return null;
    return { documented: coverage.actual, total: coverage.expected, tool: "TypeDoc coverage" };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Exported names and whether they are documented, from `go doc -all` output: what go/doc
 * keeps (exported declarations of the build's files; methods under their exported types;
 * constructors under their types), each declaration followed by its doc indented by four
 * spaces. Declarations are counted per name as the service does: each func and method,
 * each type, each name of a const/var (a group's doc documents its names, a `//` comment
 * inside a group its own spec).
 */
export function goDocCounts(text: string): { documented: number; total: number } {
  const lines = text.split("\n");
  let documented = 0;
  let total = 0;
  const count = (name: string, doc: boolean) => {
    if (!/^[A-Z]/.test(name)) return;
    total++;
    if (doc) documented++;
  };
  const DECL = /^(func|type|var|const) /;
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (!DECL.test(line)) {
      i++;
      continue;
    }
    const kind = line.split(" ")[0]!;
    const block: string[] = [line];
    const closer = line.endsWith("(") ? ")" : line.endsWith("{") ? "}" : null;
    let ticks = (line.match(/`/g) ?? []).length;
    i++;
    if (closer) {
      while (i < lines.length && !lines[i]!.startsWith(closer)) block.push(lines[i++]!);
      i++;
    } else
      while (ticks % 2 === 1 && i < lines.length) ticks += (lines[i++]!.match(/`/g) ?? []).length;
    let doc = false;
    while (i < lines.length && lines[i]!.startsWith("    ")) {
      doc = true;
      i++;
    }
    if (kind === "func") {
      const m = /^func (?:\([^)]*?(\w+)(?:\[[^\]]*\])?\) )?(\w+)/.exec(line);
      if (m) count(m[2]!, doc);
    } else if (closer === ")") {
      let specDoc = false;
      for (const inner of block.slice(1)) {
        if (/^\t\/\//.test(inner)) {
          specDoc = true;
          continue;
        }
        const m = /^\t(\w+(?:,\s*\w+)*)/.exec(inner);
        if (m) for (const n of m[1]!.split(/,\s*/)) count(n, doc || specDoc);
        specDoc = false;
      }
    } else {
      const m = /^(?:type|var|const) (\w+(?:,\s*\w+)*)/.exec(line);
      if (m) for (const n of m[1]!.split(/,\s*/)) count(n, doc);
    }
  }
  return { documented, total };
}

/** Go: `go doc -all` of each package holding API files, counted by goDocCounts. */
async function referenceGoDocs(root: string, files: string[]): Promise<DocCount | null> {
  const dirs = [...new Set(files.map((f) => path.posix.dirname(f)))].sort();
  if (dirs.length === 0) return null;
  let documented = 0;
  let total = 0;
  for (const dir of dirs) {
    const result = await exec("go", ["doc", "-all", `./${dir === "." ? "" : dir}`], {
      cwd: root,
      env: { ...process.env, GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
      maxBuffer: 64 * 1024 * 1024,
    }).catch((error: unknown) => {
      console.log(`health-accuracy: go doc ./${dir}: ${String(error).slice(0, 300)}`);
      return null;
    });
    if (!result) continue;
    const counts = goDocCounts(result.stdout);
    documented += counts.documented;
    total += counts.total;
  }
  return total > 0 ? { documented, total, tool: "go doc -all" } : null;
}

/** The documentation reference over every language with API files, summed. */
async function referenceDocs(
  root: string,
  repo: RepoFiles,
): Promise<{ percent: number | null; tool: string }> {
  const api = repo.files.filter(isApiFile);
  const of = (...languages: string[]) =>
    api.filter((f) => languages.includes(f.language ?? "")).map((f) => f.path);
  const parts: Array<{ language: string; count: DocCount | null }> = [];
  if (of("javascript", "typescript").length > 0)
    parts.push({
      language: "JS/TS",
      count: await referenceJsDocs(root, of("javascript", "typescript")),
    });
  if (of("go").length > 0)
    parts.push({ language: "Go", count: await referenceGoDocs(root, of("go")) });
  if (of("python").length > 0)
    parts.push({ language: "Python", count: await referencePythonDocs(root, repo) });
  if (parts.length === 0) return { percent: null, tool: "none (no API files)" };
  const failed = parts.filter((p) => p.count === null);
  const tool = parts
    .map((p) =>
      p.count
        ? `${p.count.tool} ${p.count.documented}/${p.count.total}`
        : `${p.language} reference failed (see above)`,
    )
    .join("; ");
  // A partial reference would compare different symbol sets: none when one is missing.
  if (failed.length > 0) return { percent: null, tool };
  const documented = parts.reduce((n, p) => n + p.count!.documented, 0);
  const total = parts.reduce((n, p) => n + p.count!.total, 0);
  return { percent: total > 0 ? (100 * documented) / total : null, tool };
}

/**
 * Outdated direct dependencies by the ecosystem's own tool: `npm outdated` entries whose
 * wanted version is not the latest, or `go list -m -u` modules with an Update that go.mod
 * requires directly. Null with the reason where there is no reference here.
 */
async function referenceOutdated(
  root: string,
  repo: RepoFiles,
): Promise<{ count: number | null; tool: string }> {
  const has = (p: string) => repo.files.some((f) => f.path === p);
  if (has("package.json")) {
    // --prefer-online: npm's cached packuments may be minutes old; the service asks the
    // registry. --min-release-age=0: a machine's release-age window (npmrc) is not the
    // service's. --node-version: the Node the service picks for (its own, as the sandbox's).
    const result = await sh(
      `npm outdated --json --prefer-online --min-release-age=0 --node-version=${process.version}`,
      root,
    );
    const json = JSON.parse(result.stdout || "{}") as Record<
      string,
      { wanted?: string; latest?: string }
    >;
    // Entries whose latest is newer than what the range admits (wanted). npm also lists a
    // range ahead of latest (babel-core ^7.0.0-bridge.0, latest 6.26.3): not outdated.
    return {
      count: Object.values(json).filter(
        (d) =>
          semver.valid(d.wanted ?? "") !== null &&
          semver.valid(d.latest ?? "") !== null &&
          semver.gt(d.latest!, d.wanted!),
      ).length,
      tool: "npm outdated",
    };
  }
  if (has("go.mod")) {
    const result = await sh("go list -m -u -json all", root, { GOFLAGS: "-mod=mod" });
    if (!result.ok) return { count: null, tool: "go list -m -u (failed)" };
    // A stream of JSON objects, one per module.
    const modules = JSON.parse(`[${result.stdout.replace(/}\s*{/g, "},{")}]`) as Array<{
      Main?: boolean;
      Indirect?: boolean;
      Update?: unknown;
    }>;
    return {
      count: modules.filter((m) => !m.Main && !m.Indirect && m.Update).length,
      tool: "go list -m -u (direct)",
    };
  }
  if (repo.files.some((f) => f.language === "python"))
    return { count: null, tool: "n/a: PyPI unreachable here (pip list --outdated)" };
  return { count: null, tool: "none" };
}

/** The jscpd CLI on the given files: its duplicated-lines percentage. */
async function referenceDuplication(root: string, files: string[]): Promise<number | null> {
  if (files.length === 0) return null;
  const out = await mkdtemp(path.join(os.tmpdir(), "bench-jscpd-"));
  // jscpd applies the repository's .gitignore to what it is given, and matches its patterns
  // anywhere (dayjs ignores its built `locale` and `plugin` folders, and jscpd then skipped
  // the tracked src/locale and src/plugin: 3 of 184 files). The same files are copied to a
  // folder of their own, paths kept, and jscpd reads exactly those.
  const tree = path.join(out, "tree");
  try {
    for (const file of files) {
      await mkdir(path.dirname(path.join(tree, file)), { recursive: true });
      await copyFile(path.join(root, file), path.join(tree, file));
    }
    await exec(
      path.join(ROOT, "node_modules", ".bin", "jscpd"),
      ["--silent", "--reporters", "json", "--output", out, tree],
      { cwd: root, maxBuffer: 64 * 1024 * 1024 },
    ).catch(() => undefined);
    const report = (await readJson(path.join(out, "jscpd-report.json"))) as {
      statistics: { total: { percentage: number } };
    };
    return report.statistics.total.percentage;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

export const healthAccuracy: Benchmark = {
  name: "health-accuracy",
  description:
    "health figures beside the reference tools (c8/nyc/jest/vitest, coverage.py, go cover, TypeDoc, go doc, __doc__, npm outdated, jscpd) on HEALTH_BENCH_REPOS",
  async run(): Promise<BenchReport> {
    const repos = (process.env.HEALTH_BENCH_REPOS ?? "")
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean);
    if (repos.length === 0) {
      console.log(
        "health-accuracy: skipped; set HEALTH_BENCH_REPOS=/path/a,/path/b to working copies of public repositories (dependencies installed).",
      );
      return { subjects: [], checks: [], info: { skipped: "HEALTH_BENCH_REPOS not set" } };
    }
    const config = loadConfig({ ...process.env, NODE_ENV: "development" });
    // The sandbox as the service sets it up (service.ts), so SANDBOX_NETWORK=public applies.
    configureSandbox(config.sandbox);
    const rows: Array<Record<string, unknown>> = [];
    const checks: Check[] = [];
    for (const root of repos) {
      const name = path.basename(root);
      const repo = await readRepoFiles(root);
      const sources = codeFiles(repo).filter((f) => !f.test);
      const [docs, debt, manifests] = await Promise.all([
        findExports(repo),
        measureTechDebt(repo),
        readManifests(root, repo),
      ]);
      const freshness = await measureFreshness(
        new RegistryClient(config.health.registry),
        manifests,
      );
      const coverage = await measureCoverage(repo, {
        root,
        timeoutMs: 900_000,
        goproxy: config.health.registry.goproxyUrl,
      });
      const refCoverage = await referenceCoverage(root, repo);
      const refDocs = await referenceDocs(root, repo);
      const refOutdated = await referenceOutdated(root, repo);
      const refDup = await referenceDuplication(
        root,
        sources.map((f) => f.path),
      );
      const documented = docs.symbols.filter((s) => s.documented).length;
      const docPercent = docs.symbols.length > 0 ? (100 * documented) / docs.symbols.length : null;
      const details = freshness.details as { outdated?: number };
      const row = {
        repo: name,
        coverage: round(coverage.score),
        coverage_measured: coverage.measured,
        coverage_ref: round(refCoverage.percent),
        coverage_ref_tool: refCoverage.tool,
        docs: round(docPercent),
        docs_symbols: docs.symbols.length,
        docs_documented: documented,
        docs_ref: round(refDocs.percent),
        docs_ref_tool: refDocs.tool,
        outdated: details.outdated ?? null,
        outdated_ref: refOutdated.count,
        outdated_ref_tool: refOutdated.tool,
        duplication: round(
          ((debt.details.duplication as { percent?: number } | undefined)?.percent ?? null) as
            number | null,
        ),
        duplication_ref: round(refDup),
      };
      rows.push(row);
      const within = (a: number | null, b: number | null) =>
        a !== null && b !== null && Math.abs(a - b) <= 5;
      if (row.coverage_ref !== null)
        checks.push({
          name: `${name} coverage: points apart`,
          value: Math.abs((row.coverage ?? 0) - row.coverage_ref),
          atMost: true,
          target: 5,
          pass: within(row.coverage, row.coverage_ref),
          detail: `service ${row.coverage} vs ${refCoverage.tool} ${row.coverage_ref}`,
        });
      if (row.docs_ref !== null)
        checks.push({
          name: `${name} documentation: points apart`,
          value: Math.abs((row.docs ?? 0) - row.docs_ref),
          atMost: true,
          target: 5,
          pass: within(row.docs, row.docs_ref),
          detail: `service ${row.docs}% (${documented}/${docs.symbols.length}) vs ${refDocs.tool}: ${row.docs_ref}%`,
        });
      if (row.outdated_ref !== null)
        checks.push({
          name: `${name} outdated deps: count apart`,
          value: Math.abs((row.outdated ?? 0) - row.outdated_ref),
          atMost: true,
          target: 0,
          pass: row.outdated === row.outdated_ref,
          detail: `service ${row.outdated} vs ${refOutdated.tool} ${row.outdated_ref}`,
        });
    }
    console.table(rows);
    return { subjects: [], checks, info: { repos: rows } };
  },
};
