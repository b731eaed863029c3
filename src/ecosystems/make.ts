import { readText, TOO_LARGE } from "./kit.js";
import type { Ecosystem } from "./types.js";

/*
 * make: a Makefile with a `test` target. It runs whatever the repository's tests are, so
 * when it is found the ecosystems after it in the registry are not checked separately.
 */

export const make: Ecosystem<"make"> = {
  id: "make",
  description: "make (a Makefile with a test target)",
  verify: { detect: detectMakefile, umbrella: true },
};

/*
 * `test` as a rule target, alone or among several (`test lint:`), with a double colon
 * allowed, but not the assignments `test := …` and `test ::= …`.
 */
const MAKE_TEST_TARGET = /^(?:[\w./-]+[ \t]+)*test(?:[ \t]+[\w./-]+)*[ \t]*:(?!:?=)/m;

async function detectMakefile(workdir: string) {
  // GNU make's own search order: `make test` reads the first of these that exists.
  for (const name of ["GNUmakefile", "makefile", "Makefile"]) {
    const text = await readText(workdir, name);
    if (text === null) continue;
    if (text === TOO_LARGE || !MAKE_TEST_TARGET.test(text)) return null;
    return { source: name, checks: [{ name: "make test", command: "make test" }] };
  }
  return null;
}
