/*
 * Security heuristics over the repository's files: committed secrets (well-known key
 * formats, private keys, assignments of high-entropy strings to secret-named variables,
 * committed `.env` files) and dangerous calls (eval, shell commands built from strings,
 * disabled TLS checks). Findings carry a path, a line, a kind and at most a masked preview:
 * a secret's value never enters a report.
 */
import type { RepoFiles, ScanFile } from "./files.js";

export interface SecretFinding {
  path: string;
  line: number;
  kind: string;
  /** The first characters and the length, never the value. */
  preview: string;
}

export interface DangerousCall {
  path: string;
  line: number;
  kind: string;
  language: string;
}

interface SecretPattern {
  kind: string;
  pattern: RegExp;
  /** Which capture group holds the secret (0: the whole match). */
  group?: number;
  /** Extra check on the captured value (entropy, placeholders). */
  accept?(value: string): boolean;
}

/** Shannon entropy in bits per character. */
export function entropy(value: string): number {
  const counts = new Map<string, number>();
  for (const c of value) counts.set(c, (counts.get(c) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const PLACEHOLDER =
  /example|placeholder|changeme|your[_-]?|xxxx|dummy|sample|fake|test|redacted|\$\{|<|\{\{|process\.env|os\.environ/i;

export const SECRET_PATTERNS: readonly SecretPattern[] = [
  {
    kind: "private_key",
    pattern: /-----BEGIN (?:(?:RSA|DSA|EC|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY(?: BLOCK)?-----/,
  },
  { kind: "aws_access_key_id", pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/ },
  { kind: "github_token", pattern: /\bgh[pousr]_[A-Za-z0-9]{36,}\b/ },
  { kind: "github_token", pattern: /\bgithub_pat_[A-Za-z0-9_]{22,}/ },
  { kind: "slack_token", pattern: /\bxox[baprs]-[A-Za-z0-9-]{10,}/ },
  { kind: "stripe_live_key", pattern: /\b[sr]k_live_[A-Za-z0-9]{20,}\b/ },
  { kind: "google_api_key", pattern: /\bAIza[0-9A-Za-z_-]{35}\b/ },
  { kind: "anthropic_api_key", pattern: /\bsk-ant-[A-Za-z0-9_-]{20,}/ },
  { kind: "openai_api_key", pattern: /\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}/ },
  {
    kind: "secret_assignment",
    pattern:
      /(?:api[_-]?key|secret|passw(?:or)?d|token|credential|auth[_-]?key)[\w-]*["']?\s*[:=]\s*["']([^"'\s]{16,})["']/i,
    group: 1,
    accept: (value) =>
      !PLACEHOLDER.test(value) &&
      /[0-9]/.test(value) &&
      /[A-Za-z]/.test(value) &&
      entropy(value) >= 3.5,
  },
];

/** `.env` files other than templates (`.env.example`, `.env.sample`, …). */
const ENV_FILE = /(^|\/)\.env(\.(?!example$|sample$|template$|dist$|defaults$)[^/]+)?$/i;

/** The masked form of a secret: its first four characters and its length. */
export function maskSecret(value: string): string {
  if (value.startsWith("-----BEGIN")) return value;
  return `${value.slice(0, 4)}… (${value.length} characters)`;
}

/** Secrets committed in the files, and `.env` files holding assignments. */
export function findSecrets(repo: RepoFiles): {
  secrets: SecretFinding[];
  envFiles: SecretFinding[];
} {
  const secrets: SecretFinding[] = [];
  const envFiles: SecretFinding[] = [];
  for (const file of repo.files) {
    if (ENV_FILE.test(file.path)) {
      const line = file.lines.findIndex((l) =>
        /^\s*(export\s+)?[A-Za-z_][A-Za-z0-9_]*\s*=\s*\S/.test(l),
      );
      if (line >= 0)
        envFiles.push({ path: file.path, line: line + 1, kind: "env_file", preview: "(file)" });
    }
    file.lines.forEach((text, i) => {
      if (text.length > 4000) return; // minified data, not a hand-written secret
      const seen = new Set<string>();
      for (const rule of SECRET_PATTERNS) {
        const match = rule.pattern.exec(text);
        if (!match) continue;
        const value = match[rule.group ?? 0] ?? match[0];
        if (rule.accept && !rule.accept(value)) continue;
        if (seen.has(value)) continue;
        seen.add(value);
        // One finding per line: the most specific rule comes first in the list.
        secrets.push({ path: file.path, line: i + 1, kind: rule.kind, preview: maskSecret(value) });
        break;
      }
    });
  }
  return { secrets, envFiles };
}

interface CallRule {
  kind: string;
  languages: ReadonlyArray<ScanFile["language"]>;
  pattern: RegExp;
}

const JS = ["javascript", "typescript"] as const;

export const DANGEROUS_CALLS: readonly CallRule[] = [
  { kind: "eval", languages: JS, pattern: /(^|[^\w$.])eval\s*\(/ },
  { kind: "new_function", languages: JS, pattern: /\bnew\s+Function\s*\(/ },
  {
    kind: "shell_interpolation",
    languages: JS,
    pattern: /\b(?:exec|execSync)\s*\(\s*(?:`[^`]*\$\{|["'][^"']*["']\s*\+|[A-Za-z_$][\w$.]*\s*\+)/,
  },
  { kind: "shell_true", languages: JS, pattern: /\bshell\s*:\s*true\b/ },
  {
    kind: "tls_verification_disabled",
    languages: JS,
    pattern: /\brejectUnauthorized\s*:\s*false\b/,
  },
  {
    kind: "tls_verification_disabled",
    languages: JS,
    pattern: /NODE_TLS_REJECT_UNAUTHORIZED\s*[=:]\s*["']?0/,
  },
  { kind: "eval", languages: ["python"], pattern: /(^|[^\w.])(?:eval|exec)\s*\(/ },
  { kind: "shell_true", languages: ["python"], pattern: /\bshell\s*=\s*True\b/ },
  {
    kind: "shell_interpolation",
    languages: ["python"],
    pattern: /\bos\.(?:system|popen)\s*\(\s*(?:f["']|[^)]*(?:\+|%|\.format\())/,
  },
  { kind: "tls_verification_disabled", languages: ["python"], pattern: /\bverify\s*=\s*False\b/ },
  { kind: "unsafe_deserialization", languages: ["python"], pattern: /\bpickle\.loads?\s*\(/ },
  {
    kind: "unsafe_deserialization",
    languages: ["python"],
    pattern: /\byaml\.load\s*\((?![^)]*Loader\s*=\s*(?:yaml\.)?(?:Safe|CSafe)Loader)/,
  },
  {
    kind: "tls_verification_disabled",
    languages: ["go"],
    pattern: /\bInsecureSkipVerify\s*:\s*true\b/,
  },
  {
    kind: "shell_interpolation",
    languages: ["go"],
    pattern:
      /\bexec\.Command(?:Context)?\([^)]*"(?:sh|bash|\/bin\/sh|\/bin\/bash)"\s*,\s*"-c"\s*,\s*(?:fmt\.Sprintf|[^)]*\+)/,
  },
];

const COMMENT_LINE = /^\s*(\/\/|#|\*|\/\*)/;

/** Dangerous calls in the repository's own non-test code. */
export function findDangerousCalls(repo: RepoFiles): DangerousCall[] {
  const found: DangerousCall[] = [];
  for (const file of repo.files) {
    if (file.language === null || file.test || file.generated) continue;
    const rules = DANGEROUS_CALLS.filter((r) => r.languages.includes(file.language));
    if (rules.length === 0) continue;
    file.lines.forEach((text, i) => {
      if (COMMENT_LINE.test(text) || text.length > 4000) return;
      for (const rule of rules) {
        if (!rule.pattern.test(text)) continue;
        found.push({ path: file.path, line: i + 1, kind: rule.kind, language: file.language! });
        break;
      }
    });
  }
  return found;
}
