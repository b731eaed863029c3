import { AsyncLocalStorage } from "node:async_hooks";
import type { Models } from "../db/models.js";
import { type Marker, claimMarker, dropMarkers, markerKind } from "../durable/markers.js";
import type { JobKind, Scheduler } from "../queue/scheduler.js";

/** An installation event's delivery, claimed before it writes. */
export const githubDeliveryMarker = markerKind(
  "delivery",
  "github-delivery",
  (deliveryId: string) => [deliveryId],
);

/*
 * "A delivery id seen before is ignored", decided where a delivery acts, not at the door.
 *
 * Most deliveries act on nothing (a passing check, a label other than the agent label, a
 * pull request the service did not open): they write nothing, so the answer GitHub waits for
 * costs no database round trip. A delivery that acts does it in one of two ways:
 *
 * - it queues a job whose `_id` is derived from what it is about (the comment, the check
 *   run, the label event of this delivery, the closed pull request): a second delivery of
 *   it finds the job queued and queues nothing (`queueForDelivery`). The job's own
 *   once-marker (`gh-command:<comment>`, `ci-fix:<repo>:<sha>`, ...) still holds after
 *   finished jobs are pruned;
 * - it writes directly (installation events): it first claims `delivery:<id>` by unique
 *   insert (`claimDelivery`), and a claimed id is not applied twice.
 *
 * The receiver runs Probot's dispatch inside `inDelivery`, answers `duplicate: true` when
 * everything the delivery would do had been done before, and releases its claims when a
 * handler fails, so GitHub's redelivery is processed.
 */

interface DeliveryState {
  acted: number;
  repeated: number;
  claims: Marker[];
}

const current = new AsyncLocalStorage<DeliveryState>();

export interface DeliveryOutcome {
  /** Everything the delivery would do had been done (or queued) before. */
  duplicate: boolean;
}

/** Runs `dispatch` as the handling of one delivery; on failure its claims are released. */
export async function inDelivery(
  models: Models,
  dispatch: () => Promise<void>,
): Promise<DeliveryOutcome> {
  const state: DeliveryState = { acted: 0, repeated: 0, claims: [] };
  try {
    await current.run(state, dispatch);
  } catch (error) {
    if (state.claims.length > 0) await dropMarkers(models, state.claims).catch(() => undefined);
    throw error;
  }
  return { duplicate: state.acted > 0 && state.repeated === state.acted };
}

function record(fresh: boolean): void {
  const state = current.getStore();
  if (!state) return;
  state.acted += 1;
  if (!fresh) state.repeated += 1;
}

/** Queues a handler's job, unique by `unique`; one already queued counts as seen before. */
export async function queueForDelivery<T>(
  scheduler: Scheduler,
  kind: Pick<JobKind<T>, "name" | "schema">,
  data: T,
  unique: Record<string, unknown>,
): Promise<void> {
  record(await scheduler.enqueue(kind, data, { unique }));
}

/**
 * For handlers that write instead of queueing: claims the current delivery's id. `false`
 * means it was claimed before and the handler must not apply it again.
 */
export async function claimDelivery(models: Models, deliveryId: string): Promise<boolean> {
  const marker = githubDeliveryMarker(deliveryId);
  const fresh = await claimMarker(models, marker);
  if (fresh) current.getStore()?.claims.push(marker);
  record(fresh);
  return fresh;
}
