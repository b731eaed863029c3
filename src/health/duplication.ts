/*
 * Duplicated code, measured by jscpd's engine (the `jscpd` CLI's own detector, tokenizer
 * and statistics) over the files the scan already read, with jscpd's default options:
 * a clone is at least 5 lines and 50 tokens, files over 100 kB or 1000 lines are left out,
 * as the CLI does. The figure is jscpd's "duplicated lines" percentage, so it agrees with
 * `npx jscpd` run on the same files.
 */
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import type * as JscpdCore from "@jscpd/core";
import type { IClone, IOptions, IStatistic, IStore, IMapFrame, Statistic } from "@jscpd/core";
import type * as JscpdTokenizer from "@jscpd/tokenizer";
import type { Tokenizer } from "@jscpd/tokenizer";
import type { ScanFile } from "./files.js";

// The jscpd packages are CommonJS, and their ES builds import `colors/safe` without an
// extension, which Node's ESM loader rejects: load them through require. At first use, not
// at import: a fifth of a second that the processes which never scan do not pay.
const require = createRequire(import.meta.url);
interface Jscpd {
  core: typeof JscpdCore;
  tokenizer: typeof JscpdTokenizer;
  finder: {
    InFilesDetector: new (
      tokenizer: Tokenizer,
      store: IStore<IMapFrame>,
      statistic: Statistic,
      options: IOptions,
    ) => { detect(files: Array<{ path: string; content: string }>): Promise<IClone[]> };
  };
}
let loaded: Jscpd | undefined;
function jscpd(): Jscpd {
  return (loaded ??= {
    core: require("@jscpd/core") as Jscpd["core"],
    tokenizer: require("@jscpd/tokenizer") as Jscpd["tokenizer"],
    finder: require("@jscpd/finder") as Jscpd["finder"],
  });
}

export interface Duplication {
  /** Lines of the files jscpd compared. */
  lines: number;
  duplicatedLines: number;
  percent: number;
  sources: number;
  blockCount: number;
  blocks: Array<{
    path: string;
    line: number;
    lines: number;
    duplicate_of: { path: string; line: number };
  }>;
}

const LIST_LIMIT = 20;

/** jscpd's options: its defaults, with every format it knows and no reporters. */
export function jscpdOptions(): IOptions {
  const { core, tokenizer } = jscpd();
  const options: IOptions = {
    ...core.getDefaultOptions(),
    reporters: [],
    silent: true,
    format: tokenizer.getSupportedFormats(),
  };
  options.mode = core.getModeHandler(options.mode ?? "mild");
  options.hashFunction = (value: string) => createHash("md5").update(value).digest("hex");
  return options;
}

/** Duplicated lines among the given files, by jscpd. */
export async function findDuplication(files: ScanFile[]): Promise<Duplication> {
  const { core, tokenizer, finder } = jscpd();
  const options = jscpdOptions();
  const minLines = options.minLines ?? 5;
  const maxLines = options.maxLines ?? 1000;
  const maxBytes = 100 * 1024;
  const entries = files
    .filter((f) => {
      const lines = f.text.split("\n").length;
      return (
        Buffer.byteLength(f.text) <= maxBytes &&
        lines >= minLines &&
        lines <= maxLines &&
        tokenizer.getFormatByFile(f.path) !== undefined
      );
    })
    .map((f) => ({ path: f.path, content: f.text }));
  const statistic = new core.Statistic();
  const detector = new finder.InFilesDetector(
    new tokenizer.Tokenizer(),
    new core.MemoryStore<IMapFrame>(),
    statistic,
    options,
  );
  const clones = await detector.detect(entries);
  const total: IStatistic["total"] = statistic.getStatistic().total;
  const blocks = clones
    .map((c) => ({
      path: c.duplicationA.sourceId,
      line: c.duplicationA.start.line,
      lines: c.duplicationA.end.line - c.duplicationA.start.line + 1,
      duplicate_of: { path: c.duplicationB.sourceId, line: c.duplicationB.start.line },
    }))
    .sort((a, b) => b.lines - a.lines || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return {
    lines: total.lines,
    duplicatedLines: total.duplicatedLines,
    percent: total.percentage,
    sources: total.sources,
    blockCount: clones.length,
    blocks: blocks.slice(0, LIST_LIMIT),
  };
}
