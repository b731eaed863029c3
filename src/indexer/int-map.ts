/*
 * A map from 32-bit integers to non-negative integers in two typed arrays (open addressing).
 * Compound terms are keyed by 32-bit hashes, which are mostly outside V8's small-integer
 * range: as Map keys each would be a heap number.
 */
export class IntMap {
  private keys = new Int32Array(1 << 12);
  private values = new Int32Array(1 << 12); // value + 1; 0 marks an empty slot
  private used = 0;

  get size(): number {
    return this.used;
  }

  get(key: number): number | undefined {
    const mask = this.keys.length - 1;
    for (let slot = mix(key) & mask; ; slot = (slot + 1) & mask) {
      const value = this.values[slot]!;
      if (value === 0) return undefined;
      if (this.keys[slot] === key) return value - 1;
    }
  }

  set(key: number, value: number): void {
    const mask = this.keys.length - 1;
    let slot = mix(key) & mask;
    while (this.values[slot] !== 0 && this.keys[slot] !== key) slot = (slot + 1) & mask;
    if (this.values[slot] === 0) this.used++;
    this.keys[slot] = key;
    this.values[slot] = value + 1;
    // Kept at most half full so probes stay short.
    if (this.used * 2 > this.keys.length) this.grow();
  }

  private grow(): void {
    const keys = this.keys;
    const values = this.values;
    this.keys = new Int32Array(keys.length * 2);
    this.values = new Int32Array(keys.length * 2);
    this.used = 0;
    for (let i = 0; i < keys.length; i++) if (values[i] !== 0) this.set(keys[i]!, values[i]! - 1);
  }
}

/** Spreads the bits of a hash over the low ones used as the slot. */
function mix(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return h ^ (h >>> 16);
}
