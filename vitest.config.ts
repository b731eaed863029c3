import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // Two cores: files run two at a time against the one embedded database.
    maxWorkers: 2,
    pool: "forks",
    reporters: ["default"],
  },
});
