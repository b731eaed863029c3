import type { StageName } from "../../domain/tasks.js";
import type { Stage } from "../runner.js";
import { cloneStage } from "./clone.js";
import { implementStage } from "./implement.js";
import { indexStage } from "./index-stage.js";
import { planStage } from "./plan.js";

/** Every stage by name, in pipeline order. */
export const STAGES: Record<StageName, Stage> = {
  clone: cloneStage,
  index: indexStage,
  plan: planStage,
  implement: implementStage,
};
