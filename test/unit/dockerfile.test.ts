import { readFile } from "node:fs/promises";
import { beforeAll, describe, expect, it } from "vitest";

/*
 * The image (issue 43): Node 24 in the runtime stage, no compiler in it, apt without
 * recommended packages (python3-pip's brought gcc and g++, an 869 MB layer), only the built
 * service and its production dependencies copied in. Read from the Dockerfile and the
 * scripts/setup.sh it runs: the image itself is built by scripts/container-check.sh, which
 * needs podman and minutes, outside `npm test`.
 */

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Instructions with their continuation lines joined, comments left out, grouped by stage. */
function parse(text: string): { args: Map<string, string>; stages: Stage[] } {
  const joined = text
    .split("\n")
    .filter((line) => !/^\s*#/.test(line))
    .join("\n")
    .replace(/\\\n/g, " ");
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of joined.split("\n")) {
    const match = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const [, keyword, rest] = match as unknown as [string, string, string];
    if (keyword === "FROM") {
      const [from, as, name] = rest.trim().split(/\s+/);
      stages.push({
        from: from!,
        name: as?.toUpperCase() === "AS" ? name : undefined,
        instructions: [],
      });
    } else if (keyword === "ARG" && stages.length === 0) {
      const [key, value] = rest.trim().split("=", 2);
      args.set(key!, value ?? "");
    } else stages.at(-1)?.instructions.push({ keyword, args: rest.replace(/\s+/g, " ").trim() });
  }
  return { args, stages };
}

/** `${NAME}` in a FROM line, with the global ARG's default. */
function image(from: string, args: Map<string, string>): string {
  return from.replace(/\$\{(\w+)\}/g, (_, name: string) => args.get(name) ?? "");
}

const COMPILERS = /\b(gcc|g\+\+|cpp|clang|build-essential|make|python3-dev|libc6-dev|golang)\b/;

let dockerfile: ReturnType<typeof parse>;
let runtime: Stage;
let setup: string;

beforeAll(async () => {
  dockerfile = parse(await readFile("Dockerfile", "utf8"));
  runtime = dockerfile.stages.at(-1)!;
  setup = await readFile("scripts/setup.sh", "utf8");
});

describe("the Dockerfile", () => {
  it("ends with a runtime stage on Node 24's slim Debian image", () => {
    expect(dockerfile.stages.map((s) => s.name)).toEqual(["build", "go", "ferretdb", "runtime"]);
    expect(image(runtime.from, dockerfile.args)).toMatch(
      /^docker\.io\/library\/node:24-bookworm-slim$/,
    );
    expect(image(dockerfile.stages[0]!.from, dockerfile.args)).toBe(
      image(runtime.from, dockerfile.args),
    );
  });

  it("installs no compiler in the runtime stage, and apt never takes recommended packages", () => {
    const runs = runtime.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);
    expect(runs.join("\n")).toContain("bash /tmp/setup.sh");
    const installs = [
      ...runs.flatMap((r) => r.match(/apt-get install[^&|;]*/g) ?? []),
      ...(setup.match(/apt-get install[^&|;\n]*/g) ?? []),
    ];
    expect(installs.length).toBeGreaterThanOrEqual(3);
    for (const install of installs) expect(install).toContain("--no-install-recommends");
    for (const run of runs) expect(run).not.toMatch(COMPILERS);
    // apt's lists and package caches leave with the step that made them.
    const apt = runs.find((r) => r.includes("apt-get update"))!;
    expect(apt).toMatch(/rm -rf .*\/var\/lib\/apt\/lists\/\* .*\/var\/cache\/apt\/\*\.bin/);
    // The packages setup.sh may install: none is a compiler.
    const wanted = [...setup.matchAll(/want\+=\(([^)]*)\)/g)].flatMap((m) => m[1]!.split(/\s+/));
    expect(wanted).toContain("python3-pip");
    for (const name of wanted) expect(name).not.toMatch(COMPILERS);
  });

  it("copies only the built service and its production dependencies into the runtime stage", () => {
    const copies = runtime.instructions.filter((i) => i.keyword === "COPY").map((i) => i.args);
    const fromBuild = copies.filter((c) => c.startsWith("--from=build"));
    expect(fromBuild.map((c) => c.split(" ").slice(1, -1).join(" ")).sort()).toEqual([
      "/app/dist",
      "/app/node_modules",
      "/app/package.json /app/package-lock.json",
    ]);
    expect(copies.some((c) => /^\S*src\b|^\.\s/.test(c))).toBe(false);
    const build = dockerfile.stages[0]!.instructions.map((i) => i.args).join("\n");
    expect(build).toContain("npm prune --omit=dev");
    // Type declarations and source maps go, TypeScript's own lib files (read at run time) stay.
    expect(build).toMatch(
      /find node_modules .*-name '\*\.d\.ts'.* -not -path 'node_modules\/typescript\/\*' -delete/,
    );
  });
});
