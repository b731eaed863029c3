import { CARGO, GO, UNITTEST, runnerScenarios, verifyStack } from "../helpers/verify-scenarios.js";

/*
 * Verification judges by tests, not lines (docs/api.md, "Verification baseline"; issue 41 item 8): the four scenarios of
 * test/helpers/verify-scenarios.ts on runners of the machine read per test, unittest, go test
 * and cargo test, in the real sandbox (no network for the checks: the go module and the crate
 * have no dependencies). go's first run in a new account compiles the standard library into
 * the account's build cache: about 75 s of the file's time on a loaded 2-core machine.
 */

const RUNNERS = [UNITTEST, GO, CARGO];
runnerScenarios(RUNNERS, verifyStack(RUNNERS));
