import type { Agenda } from "agenda";
import type { Db, ObjectId } from "mongodb";
import { z } from "zod";
import type { Models } from "../db/models.js";
import { DEFAULT_TIMEZONE } from "../domain/automations/cron.js";
import {
  enabledCronSchedules,
  runCronJob,
  type CronJobs,
} from "../domain/automations/automations.js";
import type { TaskDeps } from "../domain/tasks/model.js";
import type { Logger } from "../util/logger.js";
import type { JobKind } from "../queue/scheduler.js";

/*
 * Cron automations on Agenda: one repeating job per automation (name CRON_JOB_NAME, unique
 * by `data.automation_id`), whose repeat interval is the automation's five-field schedule in
 * its time zone. The job only says "a slot may be due"; domain/automations/automations.ts
 * decides which slot and fires it once across all workers (a unique marker per slot), so a job
 * run twice (two workers locking it on FerretDB, a stale copy after a re-schedule) creates one
 * task.
 */

export const CRON_JOB_NAME = "automations.cron";

const cronJobData = z.object({ automation_id: z.string().min(1) });
export type CronJobData = z.infer<typeof cronJobData>;

/** Arms and disarms the Agenda jobs of cron automations. */
export function createCronJobs(agenda: Agenda): CronJobs {
  return {
    async arm({ id, schedule, timezone }) {
      // The unique upsert replaces the schedule of an existing job; skipImmediate makes the
      // next run the next slot from now (missed slots are never back-filled).
      await agenda
        .create<CronJobData>(CRON_JOB_NAME, { automation_id: id })
        .unique({ "data.automation_id": id })
        .repeatEvery(schedule, { timezone, skipImmediate: true })
        .save();
    },
    async disarm(id) {
      await agenda.cancel({ name: CRON_JOB_NAME, data: { automation_id: id } });
    },
  };
}

/** The job kind that runs a cron automation's slots (defined in every process). */
export function cronJobKind(deps: {
  tasks: TaskDeps;
  cron: CronJobs;
  logger: Logger;
}): JobKind<CronJobData> {
  const logger = deps.logger.child({ component: "cron" });
  return {
    name: CRON_JOB_NAME,
    schema: cronJobData,
    concurrency: 4,
    async run(data, job) {
      const result = await runCronJob(deps.tasks, deps.cron, data.automation_id, job.attrs);
      const meta = { automationId: data.automation_id, ...result };
      if (result.outcome === "refused") logger.warn(meta, "cron automation refused");
      else if (result.outcome === "created") logger.info(meta, "cron automation fired");
      else logger.debug(meta, "cron automation skipped");
    },
  };
}

interface StoredJob {
  _id: ObjectId;
  data?: { automation_id?: string };
  repeatInterval?: unknown;
  repeatTimezone?: unknown;
}

/** The Agenda jobs of cron automations (all, or one automation's), straight from the database. */
export async function findCronJobs(db: Db, automationId?: string): Promise<StoredJob[]> {
  const query: Record<string, unknown> = { name: CRON_JOB_NAME };
  if (automationId !== undefined) query["data.automation_id"] = automationId;
  return (await db
    .collection("jobs")
    .find(query, { projection: { data: 1, repeatInterval: 1, repeatTimezone: 1, disabled: 1 } })
    .toArray()) as StoredJob[];
}

/**
 * Brings the jobs in step with the automations, at worker start: every enabled cron
 * automation has exactly one job with its schedule; jobs of deleted or disabled automations
 * are removed. Heals what a process that stopped between its two writes left behind.
 */
export async function reconcileCronJobs(
  models: Models,
  db: Db,
  cron: CronJobs,
): Promise<{ armed: number; removed: number }> {
  const jobs = await findCronJobs(db);
  const byAutomation = new Map<string, StoredJob[]>();
  for (const job of jobs) {
    const id = job.data?.automation_id;
    if (!id) continue;
    byAutomation.set(id, [...(byAutomation.get(id) ?? []), job]);
  }
  const automations = await enabledCronSchedules(models);
  let armed = 0;
  let removed = 0;
  const live = new Set<string>();
  for (const a of automations) {
    live.add(a._id);
    const timezone = a.trigger_config.timezone ?? DEFAULT_TIMEZONE;
    const [first, ...extra] = byAutomation.get(a._id) ?? [];
    if (extra.length > 0) {
      await db.collection<StoredJob>("jobs").deleteMany({ _id: { $in: extra.map((j) => j._id) } });
      removed += extra.length;
    }
    if (
      !first ||
      first.repeatInterval !== a.trigger_config.schedule ||
      (first.repeatTimezone ?? DEFAULT_TIMEZONE) !== timezone
    ) {
      await cron.arm({ id: a._id, schedule: a.trigger_config.schedule, timezone });
      armed += 1;
    }
  }
  for (const [id, list] of byAutomation) {
    if (live.has(id)) continue;
    await cron.disarm(id);
    removed += list.length;
  }
  return { armed, removed };
}
