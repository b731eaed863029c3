import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/env.js";
import { METRIC_WEIGHTS } from "../../src/health/grading.js";
import { HEALTH_METRICS } from "../../src/health/metrics/index.js";
import { scanRepository } from "../../src/health/scanner.js";
import { METRIC_NAMES } from "../../src/health/types.js";
import { createLogger } from "../../src/util/logger.js";
import { createGitRepo, type GitFixture } from "../helpers/git-repo.js";

describe("the health metric registry", () => {
  it("holds one metric per report name, under its own name, with the weights of docs/api.md", () => {
    expect(Object.keys(HEALTH_METRICS).sort()).toEqual([...METRIC_NAMES].sort());
    for (const name of METRIC_NAMES) expect(HEALTH_METRICS[name].name).toBe(name);
    // The overall score's weights are the metrics' own, and unchanged.
    expect(METRIC_WEIGHTS).toEqual({
      test_coverage: 25,
      security: 25,
      tech_debt: 15,
      ci_pass_rate: 15,
      documentation: 10,
      dependency_freshness: 10,
    });
    for (const name of METRIC_NAMES) expect(METRIC_WEIGHTS[name]).toBe(HEALTH_METRICS[name].weight);
  });
});

describe("scanRepository", () => {
  const fixtures: GitFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.remove();
  });

  it("runs every registered metric on one context and weighs the ones with a score", async () => {
    const readme = `# Notes\n\n${"Plain words about this repository and how to use it. ".repeat(40)}\n`;
    const fixture = await createGitRepo({ "README.md": readme });
    fixtures.push(fixture);
    // Nothing to ask: no dependencies and no GitHub; a registry that is asked fails the metric.
    const config = loadConfig({ NODE_ENV: "test", NPM_REGISTRY_URL: "http://127.0.0.1:9" });
    const result = await scanRepository({
      root: fixture.dir,
      config: config.health,
      ci: { kind: "none", reason: "not a GitHub repository" },
      logger: createLogger({ level: "silent" }),
    });
    expect(Object.keys(result.metrics)).toEqual([...METRIC_NAMES]);
    const scored = METRIC_NAMES.filter((name) => result.metrics[name].score !== null);
    expect(scored).toEqual(["security", "documentation"]);
    expect(result.weights).toEqual({ security: 0.714, documentation: 0.286 });
    const documentation = result.metrics.documentation.score!;
    expect(result.metrics.security.score).toBe(100);
    expect(result.score).toBe(Math.round((100 * 25 + documentation * 10) / 35));
    expect(result.metrics.ci_pass_rate.details.reason).toBe("not a GitHub repository");
    expect(result.metrics.documentation.details.truncated).toBeUndefined();
  });
});
