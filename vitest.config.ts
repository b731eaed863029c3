import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    // Bounds, not waits: a test that waits on real processes (git, the sandbox, the worker)
    // must fit a loaded 2-core machine; a fast test ends as soon as it is done.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // Two cores: files run two at a time against the one embedded database.
    maxWorkers: 2,
    // No retries: a test that fails once fails the run. Tests that wait on real processes
    // await events, and size their bounds for a loaded 2-core machine with the reason beside.
    retry: 0,
    pool: "forks",
    reporters: ["default"],
  },
});
