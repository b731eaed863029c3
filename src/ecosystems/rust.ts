import { isFile } from "./kit.js";
import type { Ecosystem } from "./types.js";

/* Rust: `cargo test` when Cargo.toml is present (verification only). */

export const rust: Ecosystem<"rust"> = {
  id: "rust",
  description: "Rust (Cargo.toml)",
  verify: {
    detect: async (workdir) =>
      (await isFile(workdir, "Cargo.toml"))
        ? { source: "Cargo.toml", checks: [{ name: "cargo test", command: "cargo test" }] }
        : null,
  },
};
