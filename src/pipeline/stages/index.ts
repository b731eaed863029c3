import type { StageName } from "../../domain/tasks/model.js";
import type { Stage } from "../stage.js";
import { cleanupStage } from "./cleanup.js";
import { cloneStage } from "./clone.js";
import { implementStage } from "./implement.js";
import { indexStage } from "./index-stage.js";
import { planStage } from "./plan.js";
import { publishStage } from "./publish.js";
import { reviewStage } from "./review.js";
import { reworkStage } from "./rework.js";
import { verifyStage } from "./verify.js";

/** Every stage by name, in pipeline order. */
export const STAGES: Record<StageName, Stage> = {
  clone: cloneStage,
  index: indexStage,
  plan: planStage,
  implement: implementStage,
  rework: reworkStage,
  verify: verifyStage,
  review: reviewStage,
  publish: publishStage,
  cleanup: cleanupStage,
};
