import nock from "nock";
import { expect } from "vitest";
import { expectValidGithubRequests, watchGithub } from "./github-openapi.js";

/*
 * GitHub faked by nock for a test file: only 127.0.0.1 may be reached, every request to a
 * scope made with `gh` is checked against GitHub's REST description, and a request no mock
 * expected is collected and fails the test in `check()`.
 */

/** A nock scope on GitHub whose requests are checked against GitHub's REST description. */
export function gh(base: string, options?: nock.Options): nock.Scope {
  return watchGithub(nock(base, options));
}

export interface GithubFake {
  /** After each test: no stray request, every request valid; forgets the mocks. */
  check(): void;
  close(): void;
}

export function fakeGithub(): GithubFake {
  const stray: string[] = [];
  const onNoMatch = (req: { host?: string; hostname?: string; method?: string; path?: string }) => {
    const host = req.hostname ?? req.host ?? "";
    if (!host.startsWith("127.0.0.1")) stray.push(`${req.method} ${host}${req.path}`);
  };
  nock.disableNetConnect();
  nock.enableNetConnect("127.0.0.1");
  nock.emitter.on("no match", onNoMatch);
  return {
    check() {
      nock.cleanAll();
      const seen = [...stray];
      stray.length = 0;
      expect(seen).toEqual([]);
      expectValidGithubRequests();
    },
    close() {
      nock.emitter.removeListener("no match", onNoMatch);
      nock.enableNetConnect();
    },
  };
}

/**
 * Polls `probe` every 50 ms until it gives a truthy value, for at most `ms`. The default
 * bound fits a task's pipeline (clone, index, the model) on a loaded 2-core machine, where
 * 20 s ran out; it costs nothing when the value comes sooner.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  ms = 60_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
