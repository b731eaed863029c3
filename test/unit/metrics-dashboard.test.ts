import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { registry } from "../../src/metrics/index.js";

/*
 * docs/grafana-dashboard.json draws every metric family the service exports, and names
 * only families that exist (a renamed metric would leave an empty panel).
 */

const dashboard = JSON.parse(
  readFileSync(path.resolve(import.meta.dirname, "../../docs/grafana-dashboard.json"), "utf8"),
) as {
  title: string;
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
};

describe("the Grafana dashboard", () => {
  it("has a panel for each foreman metric family, and no unknown foreman metric", () => {
    const families = registry
      .getMetricsAsArray()
      .map((m) => m.name)
      .filter((n) => n.startsWith("foreman_"));
    expect(families.length).toBeGreaterThanOrEqual(12);
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const used = new Set(
      exprs.flatMap((e) =>
        [...e.matchAll(/\bforeman_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, "")),
      ),
    );
    for (const family of families) expect(used, family).toContain(family);
    for (const name of used) expect(families, name).toContain(name);
    // Every graph panel has a query and a unique title.
    const graphs = dashboard.panels.filter((p) => p.type !== "row");
    for (const panel of graphs) expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
    expect(new Set(graphs.map((p) => p.title)).size).toBe(graphs.length);
  });
});
