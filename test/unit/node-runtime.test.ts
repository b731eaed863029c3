import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import semver from "semver";
import { describe, expect, it } from "vitest";
import { excluding, installedEngines, lowestAccepted } from "../../scripts/node-engines.mjs";
import { enginesRange, providedMajor, satisfies } from "../../scripts/node-runtime.mjs";
import { nodeRuntimeWarning, SUPPORTED_NODE } from "../../src/util/version.js";

/*
 * The supported Node (issue 43): package.json's engines.node admits only versions every
 * installed package accepts, from the lowest of them; .nvmrc's major (what scripts/setup.sh
 * installs where the machine's Node is older) is in it; the start-up warning names the range.
 */

describe("the declared Node", () => {
  const declared = enginesRange();

  it("is accepted by every installed package, and is the lowest they all accept", () => {
    const packages = installedEngines();
    expect(packages.length).toBeGreaterThan(100);
    expect(excluding(declared, packages).map((p) => `${p.name} ${p.range}`)).toEqual([]);
    expect(semver.minVersion(declared)?.version).toBe(lowestAccepted(packages));
    expect(SUPPORTED_NODE).toBe(declared);
  });

  it("names a package whose range leaves out part of it", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-engines-"));
    try {
      const fixtures: [string, string][] = [
        ["odd", "^22.13.0 || >=23"],
        ["@scope/newer", ">=22.14"],
      ];
      for (const [name, range] of fixtures) {
        await mkdir(path.join(dir, name, "node_modules", "inner"), { recursive: true });
        await writeFile(
          path.join(dir, name, "package.json"),
          JSON.stringify({ name, version: "1.0.0", engines: { node: range } }),
        );
      }
      await writeFile(
        path.join(dir, "odd", "node_modules", "inner", "package.json"),
        JSON.stringify({ name: "inner", version: "2.0.0", engines: { node: "^22 || ^24" } }),
      );
      const packages = installedEngines(dir);
      expect(packages.map((p) => p.name).sort()).toEqual([
        "@scope/newer@1.0.0",
        "inner@2.0.0",
        "odd@1.0.0",
      ]);
      expect(excluding("^22.13.0 || >=24", packages).map((p) => p.name)).toEqual([
        "@scope/newer@1.0.0",
        "inner@2.0.0",
      ]);
      expect(lowestAccepted(packages)).toBe("22.14.0");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("is read the same by the set-up's reader as by semver", () => {
    for (const version of [
      "20.20.2",
      "22.0.0",
      "22.12.9",
      "22.13.0",
      "22.23.3",
      "23.11.0",
      "24.0.0",
      "26.1.0",
    ])
      expect([version, satisfies(version, declared)]).toEqual([
        version,
        semver.satisfies(version, declared),
      ]);
    expect(satisfies("v24.21.0", declared)).toBe(true);
    expect(() => satisfies("22.13.0", "~22.13")).toThrow(/not \^x\.y\.z or >=x\.y\.z/);
  });

  it("includes .nvmrc's major, which the set-up installs", async () => {
    const major = providedMajor();
    expect((await readFile(".nvmrc", "utf8")).trim()).toBe(major);
    expect(semver.satisfies(`${major}.99.0`, declared)).toBe(true);
  });
});

describe("the start-up warning", () => {
  it("names the supported range and the set-up on an older Node, and is silent on a supported one", () => {
    expect(nodeRuntimeWarning("v20.20.2")).toBe(
      `Node v20.20.2 is not supported (engines.node "${SUPPORTED_NODE}"): run \`bash scripts/setup.sh\`, which installs Node 22 for \`npm start\` where the machine's is older, or install Node 22 LTS or newer.`,
    );
    expect(nodeRuntimeWarning("v22.12.0")).toMatch(/^Node v22\.12\.0 is not supported/);
    expect(nodeRuntimeWarning("v22.13.0")).toBeUndefined();
    expect(nodeRuntimeWarning("v24.21.0")).toBeUndefined();
  });
});
