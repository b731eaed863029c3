import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parse as parseToml } from "smol-toml";
import {
  parseRepositoryToml,
  parseRepositoryYaml,
  RepositoryParseError,
} from "../../src/util/repo-parse.js";
import { longestStall } from "../helpers/event-loop.js";

/*
 * A repository's YAML (`.github/foreman.yml`) is parsed off the event loop (util/repo-parse.ts,
 * issue #40): the same value as the yaml package gives, a readable error for a bad file,
 * and a file that takes the parser seconds leaves the loop free meanwhile.
 */

describe("parseRepositoryYaml", () => {
  it("gives what the yaml package gives", async () => {
    const text = [
      "verify:",
      "  - npm test",
      "  - { name: lint, run: npm run lint }",
      "mcp_servers:",
      "  docs: &docs",
      "    command: node",
      "    args: [tools/docs.mjs]",
      "  again: *docs",
      "",
    ].join("\n");
    expect(await parseRepositoryYaml(text)).toEqual(parse(text));
    expect(await parseRepositoryYaml("")).toBeNull();
  });

  it("keeps the event loop free while a slow file is parsed", async () => {
    // Map keys are each checked against every earlier one: 2^16 bytes of keys are seconds of
    // the parser's time, here spent in its worker.
    const keys = Array.from({ length: 9000 }, (_, i) => `key${i}: v`).join("\n");
    const { value, stallMs } = await longestStall(() => parseRepositoryYaml(keys));
    expect(Object.keys(value as object)).toHaveLength(9000);
    // Parsed on the loop it stalls 5 s; a busy machine's scheduling alone accounts for a few
    // hundred milliseconds.
    expect(stallMs).toBeLessThan(1000);
  }, 60_000);

  it("refuses a file too large, invalid, an alias flood or nesting too deep", async () => {
    await expect(parseRepositoryYaml(`a: ${"x".repeat(300 * 1024)}`)).rejects.toThrow(
      new RepositoryParseError("larger than 256 KiB (limit 256 KiB)"),
    );
    await expect(parseRepositoryYaml("a: [1, 2")).rejects.toThrow(RepositoryParseError);
    let laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (let i = 1; i < 10; i += 1)
      laughs += `a${i}: &a${i} [${Array(10)
        .fill(`*a${i - 1}`)
        .join(", ")}]\n`;
    await expect(parseRepositoryYaml(laughs)).rejects.toThrow(/Excessive alias count/);
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    await expect(parseRepositoryYaml(deep)).rejects.toThrow(RepositoryParseError);
  }, 60_000);

  it("stops a parse that takes too long", async () => {
    const keys = Array.from({ length: 9000 }, (_, i) => `key${i}: v`).join("\n");
    await expect(parseRepositoryYaml(keys, { timeoutMs: 1 })).rejects.toThrow(
      "took longer than 0.001 s to parse (limit)",
    );
  });
});

describe("parseRepositoryToml", () => {
  it("gives what smol-toml gives, dates as their TOML text", async () => {
    const text = [
      "[project]",
      'name = "demo"',
      'dependencies = ["requests>=2", "rich"]',
      "released = 1979-05-27T07:32:00Z",
      "[tool.poetry.dependencies]",
      'httpx = { version = "^0.27", optional = true }',
      "",
    ].join("\n");
    const expected = parseToml(text) as { project: Record<string, unknown> };
    expected.project.released = "1979-05-27T07:32:00.000Z";
    expect(await parseRepositoryToml(text)).toEqual(expected);
    await expect(parseRepositoryToml("[project]\nname = ")).rejects.toMatchObject({
      name: "RepositoryParseError",
      line: 2,
    });
  });

  it("leaves the event loop idle while a megabyte of tables is parsed", async () => {
    // About 230 ms of smol-toml's time (more on a busy machine), the worst a pyproject.toml
    // within the 1 MiB read limit measured: on the loop, the loop would be busy throughout.
    let text = "";
    for (let i = 0; text.length < 1024 * 1024 - 64; i += 1) text += `[t${i}]\nk = 1\n`;
    const before = performance.eventLoopUtilization();
    const value = await parseRepositoryToml(text);
    const busy = performance.eventLoopUtilization(before).utilization;
    expect(Object.keys(value)).toHaveLength(text.split("[t").length - 1);
    expect(busy).toBeLessThan(0.5);
  }, 60_000);
});
