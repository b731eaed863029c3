import { describe, expect, it } from "vitest";
import {
  dependencyOrder,
  executionOrder,
  findCycle,
  taskGraphProblems,
  type PlannedTask,
} from "../../src/domain/prism/prism.js";

/** The graph rules of the spec planner: levels, dependency order, cycles, unknown ids. */

function item(id: number, depends_on: number[] = [], priority = 1): PlannedTask {
  return { id, description: `task ${id}`, skill: null, depends_on, priority };
}

describe("execution levels", () => {
  it("puts a diamond in three levels", () => {
    // 1 <- 2, 1 <- 3, (2, 3) <- 4
    const items = [item(4, [2, 3]), item(3, [1]), item(2, [1]), item(1)];
    expect(taskGraphProblems(items)).toEqual([]);
    expect(executionOrder(items)).toEqual([[1], [2, 3], [4]]);
  });

  it("puts a chain in one level per task", () => {
    const items = [item(1), item(2, [1]), item(3, [2]), item(4, [3])];
    expect(executionOrder(items)).toEqual([[1], [2], [3], [4]]);
  });

  it("places a task one level below its deepest dependency", () => {
    // 5 depends on 1 (level 0) and 3 (level 2): level 3.
    const items = [item(1), item(2, [1]), item(3, [2]), item(5, [1, 3]), item(6)];
    expect(executionOrder(items)).toEqual([[1, 6], [2], [3], [5]]);
  });

  it("orders a level by priority, then id", () => {
    const items = [item(3, [], 2), item(1, [], 2), item(7, [], 1), item(2, [7], 1)];
    expect(executionOrder(items)).toEqual([[7, 1, 3], [2]]);
  });

  it("gives parse's dependency order: every item after what it depends on", () => {
    const items = [item(4, [2, 3]), item(3, [1], 1), item(2, [1], 5), item(1, [], 9), item(5)];
    const ids = dependencyOrder(items).map((i) => i.id);
    expect(ids).toEqual([5, 1, 3, 2, 4]);
    for (const it_ of items)
      for (const dep of it_.depends_on) expect(ids.indexOf(dep)).toBeLessThan(ids.indexOf(it_.id));
  });
});

describe("graph problems", () => {
  it("names a cycle from its smallest id", () => {
    const items = [item(1, [3]), item(2), item(3, [1])];
    expect(findCycle(items)).toEqual([1, 3, 1]);
    expect(taskGraphProblems(items)).toEqual([
      { index: 0, field: "depends_on", message: "The dependencies form a cycle: 1 -> 3 -> 1." },
    ]);
  });

  it("names a longer cycle in dependency direction, and a self-dependency", () => {
    expect(findCycle([item(5, [9]), item(9, [7]), item(7, [5]), item(1)])).toEqual([5, 9, 7, 5]);
    expect(findCycle([item(1), item(2, [2])])).toEqual([2, 2]);
    expect(findCycle([item(1), item(2, [1]), item(3, [1, 2])])).toBeNull();
  });

  it("names an unknown dependency", () => {
    expect(taskGraphProblems([item(1), item(2, [1, 7])])).toEqual([
      { index: 1, field: "depends_on", message: "Task 2 depends on 7, which is not in the list." },
    ]);
  });

  it("names a duplicate id", () => {
    const problems = taskGraphProblems([item(1), item(2), item(1, [2])]);
    expect(problems).toEqual([
      {
        index: 2,
        field: "id",
        message: "Id 1 is used twice (items 0 and 2 of the list); ids must be unique.",
      },
    ]);
  });
});
