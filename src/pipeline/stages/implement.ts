import { StageError } from "../errors.js";
import type { Stage } from "../runner.js";

/**
 * IMPLEMENTING. The implement, verify, fix, review and pull-request stages arrive with the
 * agent (issue #4); until then an approved task ends here with a clear error.
 */
export const implementStage: Stage = {
  name: "implement",
  phase: "IMPLEMENTING",
  async run() {
    throw new StageError(
      "Implementing is not available in this version of the service yet: the implement, verify, review and pull-request stages come with the next release. The approved plan is kept on the task.",
    );
  },
};
