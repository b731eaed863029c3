import { randomBytes } from "node:crypto";
import type { Models } from "../db/models.js";

/*
 * A per-process read cache kept honest by a shared marker document. Writers that change
 * what is cached bump the marker; every process reads the marker by `_id` every `pollMs`
 * and drops its entries when it changed, so a change reaches every process within `pollMs`.
 * Used for the rarely changing reads on the task-creation path (an account's tier, a
 * workspace), which FerretDB would otherwise answer with one round trip each.
 */

/** Bumps a marker: every MarkerCache watching it drops its entries at its next poll. */
export async function bumpMarker(models: Models, markerId: string): Promise<void> {
  try {
    await models.Once.collection.updateOne(
      { _id: markerId as never },
      {
        $set: {
          scope: "cache-marker",
          value: randomBytes(8).toString("hex"),
          updated_at: new Date(),
        },
      },
      { upsert: true },
    );
  } catch (error) {
    // A concurrent first upsert may collide on _id; the marker changed either way.
    if ((error as { code?: unknown }).code !== 11000) throw error;
  }
}

export class MarkerCache<T> {
  private readonly entries = new Map<string, { value: T; generation: unknown; at: number }>();
  private generation: unknown;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly models: Models,
    private readonly markerId: string,
    private readonly pollMs: number,
    private readonly load: (id: string) => Promise<T | null>,
    private readonly maxAgeMs = 30_000,
  ) {}

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
    const doc = await this.models.Once.collection.findOne(
      { _id: this.markerId as never },
      { projection: { value: 1 } },
    );
    if (doc?.value !== this.generation) {
      this.generation = doc?.value;
      this.entries.clear();
    }
  }

  /** The value, from memory while the marker is unchanged, else loaded. */
  async get(id: string): Promise<T | null> {
    const entry = this.entries.get(id);
    if (entry && entry.generation === this.generation && Date.now() - entry.at < this.maxAgeMs)
      return entry.value;
    const generation = this.generation;
    const value = await this.load(id);
    if (value === null) return null;
    if (this.entries.size > 10_000) this.entries.clear();
    this.entries.set(id, { value, generation, at: Date.now() });
    return value;
  }
}
