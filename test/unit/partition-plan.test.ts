import { describe, expect, it } from "vitest";
import { partitionPlan } from "../../src/pipeline/stages/implement.js";

const step = (n: number, files: string[]) => ({ step: n, title: `s${n}`, description: "", files });

describe("partitionPlan", () => {
  it("leaves small plans to one agent", () => {
    expect(partitionPlan([step(1, ["a"]), step(2, ["b"])], 6, 3)).toBeNull();
    const many = [1, 2, 3, 4, 5, 6].map((n) => step(n, [`f${n}`]));
    expect(partitionPlan(many, 6, 1)).toBeNull();
  });

  it("keeps steps sharing a file together and the file sets disjoint", () => {
    const steps = [
      step(1, ["a", "b"]),
      step(2, ["b", "c"]), // joined to 1 through b
      step(3, ["d"]),
      step(4, ["e"]),
      step(5, ["f", "a"]), // joined to 1 through a
      step(6, ["g"]),
      step(7, []), // no files: goes with the first part
    ];
    const parts = partitionPlan(steps, 6, 3)!;
    expect(parts).toHaveLength(3);
    const files = parts.flatMap((p) => p.files);
    expect(new Set(files).size).toBe(files.length);
    expect(files.sort()).toEqual(["a", "b", "c", "d", "e", "f", "g"]);
    const withA = parts.find((p) => p.files.includes("a"))!;
    expect(withA.steps.map((s) => s.step)).toEqual(expect.arrayContaining([1, 2, 5]));
    expect(parts[0]!.steps.some((s) => s.step === 7)).toBe(true);
    for (const part of parts) {
      const order = part.steps.map((s) => s.step);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
  });

  it("packs many groups into at most maxWorkers parts of similar size", () => {
    const steps = [1, 2, 3, 4, 5, 6, 7, 8].map((n) => step(n, [`f${n}`]));
    const parts = partitionPlan(steps, 6, 3)!;
    expect(parts.map((p) => p.files.length).sort()).toEqual([2, 3, 3]);
  });

  it("returns null when every step is tied to every other", () => {
    const steps = [1, 2, 3, 4, 5, 6].map((n) => step(n, [`f${n}`, "shared"]));
    expect(partitionPlan(steps, 6, 3)).toBeNull();
  });
});
