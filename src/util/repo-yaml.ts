import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/*
 * YAML a repository wrote (`.github/foreman.yml`, read from the working copy or through
 * GitHub's contents API), parsed off the event loop. The `yaml` package reads about a
 * megabyte a second and checks each map key against every earlier one: 256 KiB of
 * `kN: v` lines held the loop 5.5 s of CPU, 16 KiB still 35 to 65 ms, and a deep flow
 * sequence or an alias flood costs as much before it is refused (issue #40). So the text is
 * parsed in a worker thread with a time, memory and stack bound; a repository's bad file
 * costs the service a thread for at most PARSE_TIMEOUT_MS, never its loop.
 */

/** Larger files are refused before parsing (config files are a few kilobytes). */
export const REPOSITORY_YAML_MAX_BYTES = 256 * 1024;
/** A parse that takes longer is stopped (a few hundred milliseconds at the size limit). */
export const REPOSITORY_YAML_TIMEOUT_MS = 5_000;

/** The worker: parse the text, answer the value (plain data) or the error's message. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { parse } = require(workerData.yaml);
let answer;
try {
  answer = { ok: true, value: parse(workerData.text, { maxAliasCount: 100 }) };
} catch (error) {
  answer = { ok: false, message: String(error && error.message) };
}
parentPort.postMessage(answer);
`;

type Answer = { ok: true; value: unknown } | { ok: false; message: string };

/** Why a repository's YAML was not read: its message is the first line for a log. */
export class RepositoryYamlError extends Error {
  override name = "RepositoryYamlError";
}

/**
 * Parses YAML from a repository in a worker thread. Throws RepositoryYamlError when it is
 * too large, invalid (the parser's message), or takes too long.
 */
export async function parseRepositoryYaml(
  text: string,
  { timeoutMs = REPOSITORY_YAML_TIMEOUT_MS }: { timeoutMs?: number } = {},
): Promise<unknown> {
  if (Buffer.byteLength(text) > REPOSITORY_YAML_MAX_BYTES)
    throw new RepositoryYamlError(
      `larger than ${REPOSITORY_YAML_MAX_BYTES / 1024} KiB (limit ${REPOSITORY_YAML_MAX_BYTES / 1024} KiB)`,
    );
  const yaml = createRequire(import.meta.url).resolve("yaml");
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { text, yaml },
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
            new RepositoryYamlError(`took longer than ${timeoutMs / 1000} s to parse (limit)`),
          ),
        timeoutMs,
      );
      worker.once("message", resolve);
      worker.once("error", (error) => reject(new RepositoryYamlError(error.message)));
      worker.once("exit", (code) =>
        reject(new RepositoryYamlError(`its parser stopped (exit ${code})`)),
      );
    });
    if (!answer.ok) throw new RepositoryYamlError(answer.message);
    return answer.value;
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}
