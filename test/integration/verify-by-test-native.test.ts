import {
  CARGO,
  GO,
  PYTEST,
  UNITTEST,
  runnerScenarios,
  verifyStack,
} from "../helpers/verify-scenarios.js";

/*
 * Verification judges by tests, not lines (SPEC §4c; issue 41 item 8): the four scenarios of
 * test/helpers/verify-scenarios.ts on the runners on the machine, pytest, unittest, go test
 * and cargo test, in the real sandbox (no network for the checks: the go module and the
 * crate have no dependencies). The JavaScript runners are verify-by-test.test.ts.
 */

const RUNNERS = [PYTEST, UNITTEST, GO, CARGO];
runnerScenarios(RUNNERS, verifyStack(RUNNERS));
