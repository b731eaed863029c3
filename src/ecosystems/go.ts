import semver from "semver";
import { describeResult } from "../sandbox/index.js";
import { isFile, readReport, timedOutAttempt } from "./kit.js";
import type {
  CoverageAttempt,
  CoverageContext,
  Ecosystem,
  ManifestFiles,
  Manifests,
} from "./types.js";

/* Go: `go test` as the check and for coverage (a cover profile), go.mod as the manifest. */

export const go: Ecosystem<"go"> = {
  id: "go",
  description: "Go (go.mod)",
  verify: {
    detect: async (workdir) => {
      if (!(await isFile(workdir, "go.mod"))) return null;
      const checks = [{ name: "go test", command: "go test ./..." }];
      // Modules to download only when go.sum pins some (the setup step, verify/setup.ts).
      if (!(await isFile(workdir, "go.sum"))) return { source: "go.mod", checks };
      return {
        source: "go.mod",
        checks,
        install: [{ name: "go mod download", command: "go mod download" }],
        installNotes: ["go.sum present: downloading the modules it pins."],
        installInputs: ["go.mod", "go.sum"],
      };
    },
  },
  coverage: { languages: ["go"], needsTestFiles: true, measure: goCoverage },
  manifests: {
    registry: "Go",
    advisories: "osv",
    read: readGo,
    toSemver: (version) => semver.valid(version) ?? semver.coerce(version)?.version ?? null,
  },
};

// --- coverage -----------------------------------------------------------------------------

/** Covered and total statements of a Go cover profile (blocks deduplicated). */
export function parseGoProfile(text: string): {
  files: Map<string, { covered: number; total: number }>;
} {
  const blocks = new Map<string, { file: string; statements: number; hit: boolean }>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^(.+):(\d+\.\d+,\d+\.\d+) (\d+) (\d+)$/.exec(line);
    if (!match) continue;
    const key = `${match[1]}:${match[2]}`;
    const prev = blocks.get(key);
    const hit = Number(match[4]) > 0;
    blocks.set(key, {
      file: match[1]!,
      statements: Number(match[3]),
      hit: hit || (prev?.hit ?? false),
    });
  }
  const files = new Map<string, { covered: number; total: number }>();
  for (const block of blocks.values()) {
    const entry = files.get(block.file) ?? { covered: 0, total: 0 };
    entry.total += block.statements;
    if (block.hit) entry.covered += block.statements;
    files.set(block.file, entry);
  }
  return { files };
}

async function goCoverage(ctx: CoverageContext): Promise<CoverageAttempt> {
  const notes: string[] = [];
  const profile = ".foreman-coverage.out";
  const command = `go test -coverprofile=${profile} ./...`;
  const result = await ctx.run(command, {
    GOFLAGS: "-mod=mod",
    GOTOOLCHAIN: "local",
    ...(ctx.goproxy ? { GOPROXY: ctx.goproxy } : {}),
  });
  if (!result) return { ok: false, reason: ctx.outOfTime(), command, notes };
  if (result.timedOut) return timedOutAttempt(result, command, notes);
  if (result.exitCode === 127 || /go: (command )?not found/.test(result.output))
    return { ok: false, reason: "go is not installed on this worker", command, notes };
  const text = (await readReport(ctx.root, profile)) ?? "";
  const { files } = parseGoProfile(text);
  let covered = 0;
  let total = 0;
  for (const entry of files.values()) {
    covered += entry.covered;
    total += entry.total;
  }
  if (total === 0)
    return {
      ok: false,
      reason: `go test wrote no coverage profile (${describeResult(result)})`,
      command,
      notes,
    };
  if (!result.ok)
    notes.push(`Some tests failed (${describeResult(result)}); coverage is from that run.`);
  return {
    ok: true,
    figures: { covered, total, files: files.size, excluded_test_files: 0 },
    unit: "statements",
    command,
    method: "go test -coverprofile",
    testsPassed: result.ok,
    notes,
  };
}

// --- manifests ----------------------------------------------------------------------------

async function readGo(_root: string, repo: ManifestFiles, out: Manifests): Promise<void> {
  const gomod = repo.files.find((f) => f.path === "go.mod")?.text;
  if (!gomod) return;
  const entries: string[] = [];
  let inBlock = false;
  for (const raw of gomod.split(/\r?\n/)) {
    const line = raw.trim();
    if (inBlock) {
      if (line.startsWith(")")) inBlock = false;
      else entries.push(line);
    } else if (/^require\s*\($/.test(line)) inBlock = true;
    else if (line.startsWith("require ")) entries.push(line.slice("require ".length));
  }
  for (const entry of entries) {
    if (entry === "" || entry.startsWith("//")) continue;
    if (/\/\/\s*indirect\b/.test(entry)) continue;
    const [name, version] = entry.split(/\s+/);
    if (!name || !version || !semver.valid(version)) {
      out.skipped.push({
        manifest: "go.mod",
        entry: entry.slice(0, 100),
        reason: "not understood",
      });
      continue;
    }
    out.dependencies.push({
      ecosystem: "Go",
      name,
      declared: version,
      // Minimal version selection builds with exactly this version (or a higher one some
      // other module requires): it is what the repository declares.
      range: semver.clean(version),
      exact: version,
      manifest: "go.mod",
      dev: false,
    });
  }
}
