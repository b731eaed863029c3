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
 *   coverage       JS: the repository's nyc/c8 coverage script, else c8 around `npm test`,
 *                  the tool's own json-summary `total` (which counts what the tool counts);
 *                  Python: coverage.py around pytest (when the repository uses it) or
 *                  unittest, src/ on PYTHONPATH for a src layout (as tox would install
 *                  it), `coverage json` totals without test files; Go: `go tool cover
 *                  -func` total (statements, over every package).
 *   documentation  Python: the modules' objects imported and asked for `__doc__`
 *                  (runtime introspection, independent of the ast reader); no reference
 *                  tool for JavaScript/Go is installed here (shown as n/a).
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
import { copyFile, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
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
import { configureSandbox } from "../src/util/sandbox.js";
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
      let tool: string;
      if (own) {
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
async function referenceDocs(root: string, repo: RepoFiles): Promise<number | null> {
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
  return total > 0 ? (100 * documented) / total : null;
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
    "health figures beside the reference tools (c8/nyc, coverage.py, go cover, npm outdated, jscpd) on HEALTH_BENCH_REPOS",
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
        docs_ref: round(refDocs),
        docs_ref_tool:
          refDocs !== null
            ? "python __doc__"
            : repo.files.some((f) => f.language === "python")
              ? "python __doc__ (failed, see above)"
              : "n/a: no JS/Go doc reference tool installed here",
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
          name: `${name} coverage`,
          value: Math.abs((row.coverage ?? 0) - row.coverage_ref),
          target: 5,
          pass: within(row.coverage, row.coverage_ref),
          detail: `service ${row.coverage} vs ${refCoverage.tool} ${row.coverage_ref}`,
        });
      if (row.docs_ref !== null)
        checks.push({
          name: `${name} documentation`,
          value: Math.abs((row.docs ?? 0) - row.docs_ref),
          target: 5,
          pass: within(row.docs, row.docs_ref),
          detail: `service ${row.docs}% vs runtime __doc__ ${row.docs_ref}%`,
        });
      if (row.outdated_ref !== null)
        checks.push({
          name: `${name} outdated deps`,
          value: Math.abs((row.outdated ?? 0) - row.outdated_ref),
          target: 0,
          pass: row.outdated === row.outdated_ref,
          detail: `service ${row.outdated} vs ${refOutdated.tool} ${row.outdated_ref}`,
        });
    }
    console.table(rows);
    return { subjects: [], checks, info: { repos: rows } };
  },
};
