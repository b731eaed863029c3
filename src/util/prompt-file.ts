import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/*
 * Prompts are text files beside the code that uses them (`prompts/<name>.md`), read once
 * when that module loads and copied into dist/ by `npm run build`
 * (scripts/copy-prompts.mjs). A placeholder is `{{name}}`: letters, digits and `_` only, no
 * logic. Text that depends on a condition is computed by the caller and passed as a value.
 */

const PLACEHOLDER = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/g;

export interface PromptFile {
  /** The file's path, for messages. */
  file: string;
  /** The placeholder names the text holds, each once, in order of first use. */
  placeholders: readonly string[];
  /**
   * The text with every placeholder replaced by its value, in one pass (a value holding
   * `{{x}}` stays as it is). Throws when a value is missing or one is given that the text
   * does not use: a renamed placeholder fails loudly, not with an empty hole.
   */
  fill(values?: Readonly<Record<string, string>>): string;
}

/** Parses prompt text (the file's final newline is not part of the prompt). */
export function promptFromText(file: string, raw: string): PromptFile {
  const text = raw.endsWith("\n") ? raw.slice(0, -1) : raw;
  const placeholders = [...new Set([...text.matchAll(PLACEHOLDER)].map((m) => m[1]!))];
  return {
    file,
    placeholders,
    fill(values = {}) {
      const missing = placeholders.filter((name) => !Object.hasOwn(values, name));
      const unused = Object.keys(values).filter((name) => !placeholders.includes(name));
      if (missing.length > 0 || unused.length > 0)
        throw new Error(
          `${file}: ${[
            missing.length > 0 ? `no value for ${missing.join(", ")}` : "",
            unused.length > 0 ? `no placeholder for ${unused.join(", ")}` : "",
          ]
            .filter(Boolean)
            .join("; ")}`,
        );
      return text.replace(PLACEHOLDER, (_, name: string) => values[name]!);
    },
  };
}

/**
 * Reads a prompt file relative to a module: `loadPrompt(import.meta.url, "prompts/plan.md")`.
 * A module compiled into dist/ by `tsc` alone (the start-up tests build so when dist/ is
 * missing) has no copy beside it: the file is then read from the same place under src/.
 */
export function loadPrompt(moduleUrl: string, relative: string): PromptFile {
  const file = fileURLToPath(new URL(relative, moduleUrl));
  if (!existsSync(file)) {
    const source = file.replace(/([\\/])dist([\\/])(?!.*[\\/]dist[\\/])/, "$1src$2");
    if (source !== file && existsSync(source))
      return promptFromText(source, readFileSync(source, "utf8"));
  }
  return promptFromText(file, readFileSync(file, "utf8"));
}
