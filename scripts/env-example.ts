/*
 * Writes `.env.example` from the configuration schema (src/config/env.ts, `envSchema`): every
 * variable the service reads, in the schema's order, commented out, with its default (what
 * the schema yields when it is unset) and the meaning from README.md's configuration table.
 *
 *   npx tsx scripts/env-example.ts          # writes .env.example
 *   npx tsx scripts/env-example.ts --check  # exits 1 when .env.example is not what it writes
 *
 * `npm run lint` runs the check, so a setting added to the schema without regenerating the
 * file fails CI.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { envSchema } from "../src/config/env.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const target = path.join(root, ".env.example");

/** `| \`A\`, \`B\` | meaning | default |` rows of README.md's tables: meaning per variable. */
function readmeMeanings(): Map<string, string> {
  const meanings = new Map<string, string>();
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  for (const line of readme.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const cells = line.split(/(?<!\\)\|/).map((c) => c.trim());
    const [names, meaning] = [cells[1] ?? "", cells[2] ?? ""];
    for (const match of names.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) {
      if (!meanings.has(match[1]!)) meanings.set(match[1]!, meaning.replace(/\\\|/g, "|"));
    }
  }
  return meanings;
}

/** The value the schema gives a variable left unset, written back as an env string. */
function defaultOf(name: string): string {
  const field = envSchema.shape[name as keyof typeof envSchema.shape];
  const parsed = field.safeParse(undefined);
  if (!parsed.success || parsed.data === undefined) return "";
  const value: unknown = parsed.data;
  // TRUST_PROXY: 0 hops is written as the README writes it.
  if (name === "TRUST_PROXY" && value === 0) return "false";
  return String(value);
}

/** Wraps a comment at 98 columns. */
function comment(text: string): string[] {
  const lines: string[] = [];
  let line = "#";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.length + 1 + word.length > 98 && line !== "#") {
      lines.push(line);
      line = "#";
    }
    line += ` ${word}`;
  }
  if (line !== "#") lines.push(line);
  return lines;
}

export function renderEnvExample(): string {
  const meanings = readmeMeanings();
  const out = [
    "# Every setting of the service, with its default. Generated from the configuration schema",
    "# (src/config/env.ts) by `npx tsx scripts/env-example.ts`; do not edit by hand (CI checks it).",
    "# Copy to `.env` (read at start; variables already in the environment win) and uncomment",
    "# what you change. An empty value means the default. README.md, Configuration, explains each.",
    "",
  ];
  for (const name of Object.keys(envSchema.shape)) {
    const meaning = meanings.get(name);
    if (meaning) out.push(...comment(meaning));
    out.push(`# ${name}=${defaultOf(name)}`, "");
  }
  return out.join("\n");
}

const text = renderEnvExample();
if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(target, "utf8");
  } catch {
    // missing: reported below
  }
  if (current !== text) {
    console.error(
      ".env.example is not what the configuration schema gives: run `npx tsx scripts/env-example.ts` and commit it.",
    );
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
