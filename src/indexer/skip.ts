/*
 * What the index leaves out: third-party code, build output and other generated files say
 * little about the repository and would drown its own code in search results.
 */

export type SkipReason =
  | "vendored"
  | "generated"
  | "lock-file"
  | "credentials"
  | "binary"
  | "too-large"
  | "symlink"
  | "unreadable";

/** Directories holding other people's code. */
export const VENDORED_DIRS: ReadonlySet<string> = new Set([
  "node_modules",
  "vendor",
  "third_party",
  "third-party",
  "thirdparty",
  "bower_components",
  "jspm_packages",
  ".yarn",
  ".pnpm-store",
  "Pods",
  "Carthage",
  ".venv",
  "venv",
  "site-packages",
  ".bundle",
]);

/** Directories of build output and caches. */
export const GENERATED_DIRS: ReadonlySet<string> = new Set([
  "dist",
  "build",
  "out",
  "coverage",
  ".next",
  ".nuxt",
  ".svelte-kit",
  ".turbo",
  ".cache",
  ".parcel-cache",
  "__pycache__",
  ".pytest_cache",
  ".mypy_cache",
  ".tox",
  ".gradle",
  "__generated__",
]);

const LOCK_FILES: ReadonlySet<string> = new Set([
  "package-lock.json",
  "npm-shrinkwrap.json",
  "yarn.lock",
  "pnpm-lock.yaml",
  "bun.lockb",
  "bun.lock",
  "Cargo.lock",
  "go.sum",
  "poetry.lock",
  "Pipfile.lock",
  "uv.lock",
  "Gemfile.lock",
  "composer.lock",
  "mix.lock",
  "pubspec.lock",
  "Podfile.lock",
  "flake.lock",
  "packages.lock.json",
  "gradle.lockfile",
]);

const GENERATED_NAME = /\.min\.(?:js|css|mjs)$|\.map$|\.pb\.go$|_pb2\.py$|[._]generated\.[^/]+$/;

/** Why a directory is not walked into, or undefined. */
export function skipDirectory(name: string): SkipReason | undefined {
  if (VENDORED_DIRS.has(name)) return "vendored";
  if (GENERATED_DIRS.has(name)) return "generated";
  return undefined;
}

/** Files that conventionally hold credentials: never read into a model's context. */
const SECRET_FILE =
  /(^|\/)(\.env(\.(?!example$|sample$|template$|dist$)[^/]+)?|\.npmrc|\.pypirc|\.netrc|id_(rsa|dsa|ecdsa|ed25519)|[^/]+\.(pem|key|p12|pfx|keystore))$/i;

/** True for a path that conventionally holds credentials (`.env`, private keys, …). */
export function mayHoldSecrets(path: string): boolean {
  return SECRET_FILE.test(path);
}

/** Why a file is skipped from its path alone (relative, posix), or undefined. */
export function skipByPath(rel: string): SkipReason | undefined {
  let from = 0;
  for (;;) {
    const slash = rel.indexOf("/", from);
    if (slash < 0) break;
    const reason = skipDirectory(rel.slice(from, slash));
    if (reason !== undefined) return reason;
    from = slash + 1;
  }
  const name = rel.slice(from);
  if (LOCK_FILES.has(name)) return "lock-file";
  // Never indexed: search results and the planning prompt's snippets would show the values.
  if (mayHoldSecrets(rel)) return "credentials";
  if (GENERATED_NAME.test(name)) return "generated";
  return undefined;
}

/** True when one of the first five lines marks the file as generated. */
export function hasGeneratedHeader(bytes: Buffer): boolean {
  let end = -1;
  for (let line = 0; line < 5 && end < 4096; line++) {
    const next = bytes.indexOf(10, end + 1);
    if (next < 0) {
      end = bytes.length;
      break;
    }
    end = next;
  }
  const header = bytes.subarray(0, Math.min(end, 4096));
  if (header.indexOf("@generated") >= 0) return true;
  // Go's convention: "// Code generated <tool>. DO NOT EDIT." on one line.
  const code = header.indexOf("Code generated");
  if (code < 0) return false;
  const edit = header.indexOf("DO NOT EDIT", code);
  return edit >= 0 && header.subarray(code, edit).indexOf(10) < 0;
}

/** True when the bytes look binary: a NUL byte in the first 8 KiB. */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8192).indexOf(0) !== -1;
}
