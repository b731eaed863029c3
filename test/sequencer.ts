import { readFileSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/*
 * The order files start in: longest first, so that on two workers the last file to start is a
 * short one and no worker idles at the end while the other finishes a three-minute file.
 * Vitest sorts by the durations of the previous run, kept in node_modules/.vite (absent on a
 * fresh clone, where it falls back to "largest file first", which put files of 3 minutes near
 * the end). test/durations.json is that list, committed: each file's duration in seconds
 * from a whole-suite run (`node scripts/test-durations.mjs <vitest json report>` writes it),
 * so every run starts them in the same order. A file the list does not name (a new one) takes
 * its duration from vitest's cache of this machine, or counts as 10 s.
 */

const LISTED: Record<string, number> = JSON.parse(
  readFileSync(path.join(import.meta.dirname, "durations.json"), "utf8"),
) as Record<string, number>;
const UNLISTED_S = 10;

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const seconds = (file: TestSpecification): number => {
      const rel = path.relative(root, file.moduleId).split(path.sep).join("/");
      const cached = this.ctx.cache.getFileTestResults(`${file.project.name}:${rel}`);
      return LISTED[rel] ?? (cached ? cached.duration / 1000 : UNLISTED_S);
    };
    const failed = (file: TestSpecification): boolean => {
      const rel = path.relative(root, file.moduleId).split(path.sep).join("/");
      return this.ctx.cache.getFileTestResults(`${file.project.name}:${rel}`)?.failed ?? false;
    };
    // As vitest's own: what failed last time first, then the longest.
    return [...files].sort(
      (a, b) => Number(failed(b)) - Number(failed(a)) || seconds(b) - seconds(a),
    );
  }
}
