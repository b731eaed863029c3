import type { JobKind } from "../queue/scheduler.js";
import { autoReviewJob } from "./auto-review.js";
import { ciJob } from "./ci.js";
import { commandAckJob, commandJob } from "./commands.js";
import type { GithubHandlerDeps } from "./deps.js";
import { followUpJob } from "./follow-ups.js";
import { labelJob } from "./issues.js";
import { noticeJob } from "./notices.js";
import { outcomeJob } from "./outcomes.js";
import { progressJob } from "./progress.js";

/** The jobs the App's handlers queue, run by the workers. */
export function githubJobs(deps: GithubHandlerDeps): Array<JobKind<never>> {
  return [
    commandAckJob(deps),
    commandJob(deps),
    labelJob(deps),
    ciJob(deps),
    outcomeJob(deps),
    noticeJob(deps),
    autoReviewJob(deps),
    progressJob(deps),
    followUpJob(deps),
  ] as Array<JobKind<never>>;
}
