import { JEST, MOCHA, runnerScenarios, verifyStack } from "../helpers/verify-scenarios.js";

/*
 * Verification judges by tests, not lines (docs/api.md, "Verification baseline"; issue 41 item 8): the four scenarios of
 * test/helpers/verify-scenarios.ts on jest and mocha, run by `npm test`, each installed by the
 * setup step from the npm registry (the runner fixtures' lockfiles) and read from its report.
 */

const RUNNERS = [JEST, MOCHA];
runnerScenarios(RUNNERS, verifyStack(RUNNERS));
