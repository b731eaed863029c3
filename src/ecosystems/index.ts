import { go } from "./go.js";
import { javascript } from "./javascript.js";
import { make } from "./make.js";
import { python } from "./python.js";
import { rust } from "./rust.js";
import type { Ecosystem } from "./types.js";

/*
 * The registry of ecosystems: verification (verify/checks.ts) and the health scan
 * (health/coverage.ts, manifests.ts, freshness.ts) walk this list and name none of them.
 * Adding one is a new file beside these and one line here (docs/architecture.md, "How to
 * add an ecosystem").
 *
 * The order matters. Verification runs the detected checks in this order, and an umbrella
 * runner (make) stands in for the ecosystems after it; coverage and manifests follow it too.
 */
export const ECOSYSTEMS = [
  javascript,
  make,
  python,
  go,
  rust,
] as const satisfies readonly Ecosystem[];

export type EcosystemId = (typeof ECOSYSTEMS)[number]["id"];

export type * from "./types.js";
