import { readdir } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ECOSYSTEMS } from "../../src/ecosystems/index.js";

/*
 * The ecosystem registry (src/ecosystems/index.ts): the compiler checks each module's shape,
 * but not that a new module was given its registry line. An ecosystem left out would be
 * silently ignored by verification and health alike.
 */

const DIR = path.resolve(import.meta.dirname, "../../src/ecosystems");

function looksLikeEcosystem(value: unknown): value is { id: string } {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as { id?: unknown }).id === "string" &&
    typeof (value as { description?: unknown }).description === "string"
  );
}

describe("ecosystem registry", () => {
  it("lists every ecosystem module's ecosystem once", async () => {
    const exported: string[] = [];
    for (const name of await readdir(DIR)) {
      if (!name.endsWith(".ts") || name === "index.ts") continue;
      const module = (await import(pathToFileURL(path.join(DIR, name)).href)) as Record<
        string,
        unknown
      >;
      for (const value of Object.values(module)) {
        if (!looksLikeEcosystem(value)) continue;
        exported.push(value.id);
        expect(ECOSYSTEMS, `${name} exports "${value.id}"`).toContain(value);
      }
    }
    const ids = ECOSYSTEMS.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(exported.sort()).toEqual([...ids].sort());
  });

  it("keeps verification's order: package.json, make, then the rest", () => {
    expect(ECOSYSTEMS.map((e) => e.id)).toEqual(["javascript", "make", "python", "go", "rust"]);
    expect(ECOSYSTEMS.filter((e) => e.verify?.umbrella).map((e) => e.id)).toEqual(["make"]);
  });
});
