export {
  configNames,
  DEFAULT_CONFIG_NAMES,
  detectChecks,
  type Check,
  type VerifyPlan,
} from "./checks.js";
export {
  failureReport,
  runChecks,
  summarizeChecks,
  type CheckOutcome,
  type VerifyOutcome,
} from "./run.js";
