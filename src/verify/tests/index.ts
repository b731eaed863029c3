/*
 * Test results, not log lines (docs/api.md, "Verification baseline"; docs/architecture.md): which tests a check ran and which
 * failed, read from each runner's own report, its output as a fallback.
 */
export { countByStatus, failureSignature } from "./signature.js";
export { readOutput, readRun, runWithTests, type TestsRunResult } from "./run.js";
export type { TestResult, TestRun, TestStatus } from "./types.js";
