import { randomBytes } from "node:crypto";
import type { Models } from "../db/models.js";
import { isDuplicateKey } from "../util/duplicate-key.js";
import { markerFields, upsertMarker, type Marker } from "./markers.js";

/** A generation marker (`generationMarker`, durable/once.ts), declared by its owner. */
type Generation = Marker<"marker">;

/*
 * Cross-process signals without change streams (FerretDB has none): a marker is one
 * `once_markers` document whose `value` changes whenever what it stands for changes. Writers
 * bump it; readers poll it by `_id`, the one lookup FerretDB serves from an index. The
 * per-process caches of hot reads (account views and tiers, workspaces) and the workers'
 * intake of queued tasks all follow a marker. Unlike the other once-markers it is upserted,
 * not claimed: every bump rewrites it.
 */

/** Bumps a marker: every reader sees a new value at its next poll. */
export async function bumpMarker(models: Models, marker: Generation): Promise<void> {
  try {
    await upsertMarker(models, marker, {
      scope: marker.scope,
      value: randomBytes(8).toString("hex"),
      updated_at: new Date(),
    });
  } catch (error) {
    // A concurrent first upsert may collide on _id; the marker changed either way.
    if (!isDuplicateKey(error)) throw error;
  }
}

const pendingBumps = new Map<string, NodeJS.Timeout>();
const modelIds = new WeakMap<Models, number>();
let nextModelId = 0;

/**
 * Bumps a marker within `delayMs`, once for every call made in the meantime: for changes
 * frequent enough (task creation) that one write each would cost more than they tell.
 */
export function bumpMarkerSoon(models: Models, marker: Generation, delayMs: number): void {
  let modelId = modelIds.get(models);
  if (modelId === undefined) modelIds.set(models, (modelId = nextModelId++));
  const key = `${modelId}:${marker.id}`;
  if (pendingBumps.has(key)) return;
  const timer = setTimeout(() => {
    pendingBumps.delete(key);
    bumpMarker(models, marker).catch(() => undefined);
  }, delayMs);
  timer.unref();
  pendingBumps.set(key, timer);
}

/** A marker's current value (undefined before its first bump). */
export async function readMarker(models: Models, marker: Generation): Promise<unknown> {
  const doc = await markerFields(models, marker, ["value"]);
  return doc?.value;
}

/**
 * A per-process read cache kept honest by a marker: entries are served while the marker is
 * unchanged (polled every `pollMs`) and younger than `maxAgeMs`.
 */
export class MarkerCache<T> {
  private readonly entries = new Map<string, { value: T; generation: unknown; at: number }>();
  private generation: unknown;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly models: Models,
    private readonly marker: Generation,
    private readonly pollMs: number,
    private readonly load: (id: string) => Promise<T | null>,
    private readonly maxAgeMs = 30_000,
  ) {}

  /** Reads the marker once, then keeps polling it until `stop`. */
  async start(): Promise<void> {
    await this.poll();
    this.timer = setInterval(() => void this.poll().catch(() => this.entries.clear()), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.entries.clear();
  }

  /** Drops one entry in this process at once (the writer's own process). */
  forget(id: string): void {
    this.entries.delete(id);
  }

  private async poll(): Promise<void> {
    const value = await readMarker(this.models, this.marker);
    if (value !== this.generation) {
      this.generation = value;
      this.entries.clear();
    }
  }

  /**
   * The value, from memory while it is current, else loaded (with `load` when given, for
   * loads that need more than the id) and kept.
   */
  async get(id: string, load = this.load): Promise<T | null> {
    const entry = this.entries.get(id);
    if (entry && entry.generation === this.generation && Date.now() - entry.at < this.maxAgeMs)
      return entry.value;
    // Remember the generation the load started under: a change during the load makes the
    // stored entry stale at once instead of serving it until the next change.
    const generation = this.generation;
    const value = await load(id);
    if (value === null) return null;
    if (this.entries.size > 10_000) this.entries.clear();
    this.entries.set(id, { value, generation, at: Date.now() });
    return value;
  }
}
