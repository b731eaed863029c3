import { z } from "zod";
import type { Config } from "../config/env.js";
import { sweepHealthReports } from "../domain/health/reports.js";
import { runHealthScan, type HealthScanDeps } from "../domain/health/scan.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";

/*
 * The health-scan job (docs/api.md, "How scans run"): its payload names a report, and the
 * domain runs the scan (domain/health/scan.ts runHealthScan: lease, clone, metrics, report,
 * clone removed). The sweep job fails what no worker finishes (domain/health/reports.ts
 * sweepHealthReports).
 */

const scanSchema = z.strictObject({ report_id: z.string().min(1).max(100) });
export type HealthScanJob = z.infer<typeof scanSchema>;

export const HEALTH_SCAN_JOB = { name: "health.scan", schema: scanSchema } as const;
export const HEALTH_SWEEP_JOB = "health.sweep";

/** Queues the scan of a report; queueing the same report twice is one job. */
export async function enqueueHealthScan(scheduler: Scheduler, reportId: string): Promise<void> {
  await scheduler.enqueue(
    HEALTH_SCAN_JOB,
    { report_id: reportId },
    { unique: { "data.report_id": reportId } },
  );
}

export type HealthJobDeps = HealthScanDeps;

/** The scan job kind, run by workers. */
export function createHealthScanJob(deps: HealthJobDeps): JobKind<HealthScanJob> {
  return {
    name: HEALTH_SCAN_JOB.name,
    schema: scanSchema,
    concurrency: deps.config.health.concurrency,
    async run(data, job) {
      await runHealthScan(deps, data.report_id, async () => {
        await job.touch();
      });
    },
  };
}

/** The sweep job: fails scans no worker finishes and re-queues pending ones (every minute). */
export function createHealthSweepJob(
  deps: HealthJobDeps & { scheduler: Scheduler },
): JobKind<Record<string, never>> {
  const { config } = deps;
  return {
    name: HEALTH_SWEEP_JOB,
    schema: z.object({}).strict() as z.ZodType<Record<string, never>>,
    concurrency: 1,
    async run() {
      const { failed } = await sweepHealthReports(deps.models, {
        staleMs: healthStaleMs(config),
        pendingMaxMs: healthPendingMaxMs(config),
        requeue: (id) => enqueueHealthScan(deps.scheduler, id),
      });
      if (failed.length > 0)
        deps.logger.warn({ reports: failed }, "health scans failed by the sweep");
    },
  };
}

/** A running scan without a heartbeat for this long has lost its worker for good. */
export function healthStaleMs(config: Config): number {
  return Math.max(3 * config.jobs.lockLifetimeMs, 60_000);
}

/** A scan still pending after this long is failed: no worker is taking it. */
export function healthPendingMaxMs(config: Config): number {
  return Math.max(3 * config.health.scanTimeoutMs, 60 * 60_000);
}
