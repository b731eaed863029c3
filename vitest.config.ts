import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // Two cores: files run two at a time against the one embedded database.
    maxWorkers: 2,
    // One more try for a failed test: the suite starts real processes, browsers and database
    // restarts on a 2-core machine, where two heavy files at once have timed out (the
    // database-outage and dashboard race tests, ~1 run in 6). A test that fails twice fails.
    retry: 1,
    pool: "forks",
    reporters: ["default"],
  },
});
