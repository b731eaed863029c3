import type { SandboxResult } from "../sandbox/index.js";
import type { Language } from "./source-files.js";

/*
 * The one shape every ecosystem module has (docs/architecture.md, "How to add an
 * ecosystem"). An ecosystem says what it knows, and only that: how to find a repository's
 * checks and installs (verification, verify/checks.ts), how to measure test coverage
 * (health/coverage.ts), and how to read declared dependencies (health/manifests.ts and
 * freshness.ts). The consumers walk the registry (index.ts) and never name an ecosystem.
 */

/** One command of verification. */
export interface Check {
  name: string;
  command: string;
}

/** What an ecosystem's files imply for verification. */
export interface DetectedChecks {
  /** The file that showed it, e.g. "package.json", "go.mod", "tests/". */
  source: string;
  checks: Check[];
  /** The install steps (run by the setup step, verify/setup.ts, before any check). */
  install?: Check[];
  /** Why the install steps are needed; logged only when they are kept. */
  installNotes?: string[];
  /**
   * The files whose bytes decide what the install steps download (lockfiles, manifests):
   * the package cache entry is keyed by their hash (sandbox/cache.ts).
   */
  installInputs?: string[];
  /**
   * Folders of the working copy the install steps fill (`node_modules`): kept in the cache
   * entry, so a later working copy with the same inputs gets a copy instead of an install.
   */
  installOutputs?: string[];
}

export interface VerifyDetector {
  /**
   * Reads `workdir` (never runs anything). `notes` takes sentences for the task log, e.g.
   * why a malformed manifest was skipped. Null when the ecosystem finds nothing to run.
   */
  detect(workdir: string, notes: string[]): Promise<DetectedChecks | null>;
  /**
   * A runner over the whole repository (`make test`): when it finds checks, the ecosystems
   * after it in the registry are not checked separately.
   */
  umbrella?: boolean;
}

/** A file of the repository as the coverage adapters see it (health/files.ts ScanFile). */
export interface SourceFile {
  path: string;
  text: string;
  language: Language | null;
  test: boolean;
}

export interface CoverageFigures {
  covered: number;
  total: number;
  /** Files counted, and test files left out. */
  files: number;
  excluded_test_files: number;
}

/** One ecosystem's coverage run: figures from the tool's report, or why there are none. */
export type CoverageAttempt =
  | {
      ok: true;
      figures: CoverageFigures;
      unit: "lines" | "statements";
      command: string;
      method: string;
      testsPassed: boolean;
      notes: string[];
    }
  | { ok: false; reason: string; command: string | null; notes: string[] };

/** What health/coverage.ts gives an adapter: the working copy, its files and a time budget. */
export interface CoverageContext {
  root: string;
  /**
   * The working copy as the commands see it (/workspace in the sandbox, `root` with
   * SANDBOX=none): for paths handed to a command and read back from its reports.
   */
  sandboxRoot: string;
  files: ReadonlyMap<string, SourceFile>;
  /** GOPROXY for module downloads (from GOPROXY_URL). */
  goproxy?: string | undefined;
  /** Why the setup step did not install the dependencies (verify/setup.ts), when it did not. */
  setupFailure?: string | undefined;
  /** Runs a command in the sandbox within what is left of the budget; null when none is left. */
  run(command: string, env?: Record<string, string>): Promise<SandboxResult | null>;
  /** The reason given when the budget ran out before or during a run. */
  outOfTime(): string;
}

export interface CoverageAdapter {
  /** The scan languages (health/files.ts) whose source files this adapter measures. */
  languages: readonly Language[];
  /**
   * False when the tests are run even without files named like tests (`npm test` may test
   * anything); true when no test files means no measurement.
   */
  needsTestFiles: boolean;
  measure(ctx: CoverageContext): Promise<CoverageAttempt>;
}

/** The package registry a dependency comes from (the names OSV uses). */
export type DependencyRegistry = "npm" | "PyPI" | "Go";

export interface Dependency {
  ecosystem: DependencyRegistry;
  name: string;
  /** As written in the manifest. */
  declared: string;
  /** The declared constraint as a semver range ("*" when unconstrained), or null. */
  range: string | null;
  /** An exact version when one is known (lockfile, `==`, go.mod), for advisories. */
  exact: string | null;
  manifest: string;
  dev: boolean;
}

export interface Manifests {
  dependencies: Dependency[];
  /** Exact versions of every installed npm package (package-lock.json), for advisories. */
  npmLocked: Map<string, Set<string>> | null;
  /** Lines or entries that were not understood, with the reason. */
  skipped: Array<{ manifest: string; entry: string; reason: string }>;
}

/** The files a manifest reader sees: the scanned files (lock files are not among them). */
export interface ManifestFiles {
  files: ReadonlyArray<{ path: string; text: string; lines: string[] }>;
}

export interface ManifestReader {
  registry: DependencyRegistry;
  /** Where known vulnerabilities of exact versions are looked up (health/registry.ts). */
  advisories: "npm" | "osv";
  /** Adds the dependencies declared at the repository root (`root`: the working copy). */
  read(root: string, repo: ManifestFiles, out: Manifests): Promise<void>;
  /** A registry version as semver, for comparing with declared ranges; null when it is not one. */
  toSemver(version: string): string | null;
}

export interface Ecosystem<Id extends string = string> {
  /** Stable name, used in reports (coverage's `language`). */
  id: Id;
  /** What it covers, for people: "JavaScript and TypeScript (npm, pnpm, yarn, bun)". */
  description: string;
  verify?: VerifyDetector;
  coverage?: CoverageAdapter;
  manifests?: ManifestReader;
}
