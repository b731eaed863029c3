import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/*
 * Configuration a repository wrote, parsed off the event loop: YAML (`.github/foreman.yml`,
 * read from the working copy or through GitHub's contents API) and TOML (`pyproject.toml`).
 * The `yaml` package reads about a megabyte a second and checks each map key against every
 * earlier one: 256 KiB of `kN: v` lines held the loop 5.5 s of CPU, 16 KiB still 35 to
 * 65 ms, and a deep flow sequence or an alias flood costs as much before it is refused;
 * smol-toml took up to 230 ms for a 1 MiB pyproject.toml (issue #40). So the text is parsed
 * in a worker thread with a time, memory and stack bound: a repository's bad file costs the
 * service a thread for at most REPOSITORY_PARSE_TIMEOUT_MS, never its loop.
 */

/** Larger YAML is refused before parsing (config files are a few kilobytes). */
export const REPOSITORY_YAML_MAX_BYTES = 256 * 1024;
/** A parse that takes longer is stopped (a few hundred milliseconds at the size limits). */
export const REPOSITORY_PARSE_TIMEOUT_MS = 5_000;

/**
 * The worker: parse the text, answer the value as JSON (TOML dates become their ISO text) or
 * the error's message and line.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { format, text, parser } = workerData;
const plain = (value) => {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === "object") {
    for (const key of Object.keys(value)) value[key] = plain(value[key]);
  }
  return value;
};
const answer = (() => {
  try {
    const parsed = format === "yaml"
      ? require(parser).parse(text, { maxAliasCount: 100 })
      : plain(require(parser).parse(text));
    // As JSON text: reading it back is a fast JSON.parse, where a structured clone of tens of
    // thousands of objects held the loop for hundreds of milliseconds.
    return { ok: true, json: JSON.stringify(parsed) ?? "null" };
  } catch (error) {
    const line = error && typeof error.line === "number" ? error.line : undefined;
    return { ok: false, message: String(error && error.message), line };
  }
})();
parentPort.postMessage(answer);
`;

type Answer = { ok: true; json: string } | { ok: false; message: string; line?: number };

/** Why a repository's file was not read: its message is the first line for a log. */
export class RepositoryParseError extends Error {
  override name = "RepositoryParseError";
  constructor(
    message: string,
    /** The line the parser points at, when it says. */
    readonly line?: number,
  ) {
    super(message);
  }
}

interface ParseOptions {
  timeoutMs?: number;
}

/**
 * Parses YAML from a repository in a worker thread. Throws RepositoryParseError when it is
 * too large, invalid (the parser's message), or takes too long.
 */
export async function parseRepositoryYaml(text: string, options?: ParseOptions): Promise<unknown> {
  if (Buffer.byteLength(text) > REPOSITORY_YAML_MAX_BYTES)
    throw new RepositoryParseError(
      `larger than ${REPOSITORY_YAML_MAX_BYTES / 1024} KiB (limit ${REPOSITORY_YAML_MAX_BYTES / 1024} KiB)`,
    );
  return parseInWorker("yaml", text, options);
}

/**
 * Parses TOML from a repository in a worker thread (its caller bounds the size; dates come
 * back as their TOML text). Throws RepositoryParseError when it is invalid or too slow.
 */
export async function parseRepositoryToml(
  text: string,
  options?: ParseOptions,
): Promise<Record<string, unknown>> {
  return (await parseInWorker("toml", text, options)) as Record<string, unknown>;
}

async function parseInWorker(
  format: "yaml" | "toml",
  text: string,
  { timeoutMs = REPOSITORY_PARSE_TIMEOUT_MS }: ParseOptions = {},
): Promise<unknown> {
  const parser = createRequire(import.meta.url).resolve(format === "yaml" ? "yaml" : "smol-toml");
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { format, text, parser },
    resourceLimits: { maxOldGenerationSizeMb: 128, stackSizeMb: 4 },
    stdout: true,
    stderr: true,
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await new Promise<Answer>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new RepositoryParseError(`took longer than ${timeoutMs / 1000} s to parse (limit)`),
          ),
        timeoutMs,
      );
      worker.once("message", resolve);
      worker.once("error", (error) => reject(new RepositoryParseError(error.message)));
      worker.once("exit", (code) =>
        reject(new RepositoryParseError(`its parser stopped (exit ${code})`)),
      );
    });
    if (!answer.ok) throw new RepositoryParseError(answer.message, answer.line);
    return JSON.parse(answer.json) as unknown;
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}
