import { isFile } from "./kit.js";
import type { Ecosystem } from "./types.js";

/* Rust: `cargo test` when Cargo.toml is present (verification only). */

export const rust: Ecosystem<"rust"> = {
  id: "rust",
  description: "Rust (Cargo.toml)",
  verify: {
    detect: async (workdir) => {
      if (!(await isFile(workdir, "Cargo.toml"))) return null;
      const checks = [{ name: "cargo test", command: "cargo test" }];
      // Without Cargo.lock, `cargo fetch` would write one into the working copy.
      if (!(await isFile(workdir, "Cargo.lock"))) return { source: "Cargo.toml", checks };
      return {
        source: "Cargo.toml",
        checks,
        install: [{ name: "cargo fetch", command: "cargo fetch --locked" }],
        installNotes: ["Cargo.lock present: fetching the crates it pins."],
        installInputs: ["Cargo.toml", "Cargo.lock"],
      };
    },
  },
};
