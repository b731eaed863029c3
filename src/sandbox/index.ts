/* The sandbox: runs a command in the task's working copy, confined (docs/architecture.md). */
export * from "./run.js";
