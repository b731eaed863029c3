import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config/env.js";

describe("TRUST_PROXY", () => {
  it("is a hop count: unset/false 0, true 1, or a number", () => {
    expect(loadConfig({}).trustProxy).toBe(0);
    for (const [value, hops] of [
      ["false", 0],
      ["0", 0],
      ["true", 1],
      ["yes", 1],
      ["1", 1],
      ["3", 3],
    ] as const)
      expect(loadConfig({ TRUST_PROXY: value }).trustProxy, value).toBe(hops);
  });

  it("refuses anything else", () => {
    for (const value of ["-1", "1.5", "all", "100"])
      expect(() => loadConfig({ TRUST_PROXY: value }), value).toThrow(ConfigError);
  });
});
