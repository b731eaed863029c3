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

/**
 * Files that conventionally hold credentials: never read into a model's context, never
 * written by the tools. `.env` files (not their examples), npm/pypi/yarn/git credential
 * files, .netrc/_netrc, SSH private keys, key stores, AWS, Docker, Kubernetes and gcloud
 * credential files, and the like.
 */
const SECRET_FILE = new RegExp(
  "(^|/)(" +
    [
      "\\.env(\\.(?!example$|sample$|template$|dist$)[^/]+)?",
      "\\.envrc",
      "\\.npmrc",
      "\\.pypirc",
      "\\.netrc",
      "_netrc",
      "\\.git-credentials",
      "\\.pgpass",
      "\\.my\\.cnf",
      "\\.htpasswd",
      "\\.vault-token",
      "credentials\\.tfrc\\.json",
      "id_(rsa|dsa|ecdsa|ed25519)(_sk)?",
      "[^/]+\\.(pem|key|p12|pfx|keystore|jks|ppk|asc|gpg)",
      "\\.aws/(credentials|config)",
      "\\.docker/config\\.json",
      "\\.kube/config",
      "kubeconfig",
      "application_default_credentials\\.json",
      "\\.config/gcloud/.+",
      "\\.ssh/(?!known_hosts$|config$)[^/]+(?<!\\.pub)",
    ].join("|") +
    ")$",
  "i",
);

/** True for a path that conventionally holds credentials (`.env`, private keys, …). */
export function mayHoldSecrets(path: string): boolean {
  return SECRET_FILE.test(path);
}

/** Content that is a credential whatever the file is called: private keys, registry tokens. */
const SECRET_CONTENT =
  /-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----|\b(?:npmAuthToken|npmAuthIdent|_authToken|_auth|aws_secret_access_key)\s*[:=]\s*["']?[^\s"'$]{8}/;

/** True when a file's bytes hold a private key or a registry/cloud token. */
export function holdsSecrets(bytes: Buffer): boolean {
  return SECRET_CONTENT.test(bytes.toString("latin1"));
}

/*
 * Build-output directory names that also hold hand-written code often enough (a `build/`
 * of scripts, an `out/` module): a file git tracks under one is indexed unless its content
 * looks generated (looksBuilt). Untracked ones, and any found by the directory walk, are
 * still skipped by name.
 */
const AMBIGUOUS_DIRS: ReadonlySet<string> = new Set(["build", "dist", "out"]);

/** True when the path runs through build/, dist/ or out/ (see AMBIGUOUS_DIRS). */
export function underAmbiguousDir(rel: string): boolean {
  const parts = rel.split("/");
  parts.pop();
  return parts.some((p) => AMBIGUOUS_DIRS.has(p));
}

/**
 * Why a file is skipped from its path alone (relative, posix), or undefined. `tracked`: git
 * lists the file as committed, so build/dist/out do not rule it out (see AMBIGUOUS_DIRS).
 */
export function skipByPath(rel: string, tracked = false): SkipReason | undefined {
  let from = 0;
  for (;;) {
    const slash = rel.indexOf("/", from);
    if (slash < 0) break;
    const dir = rel.slice(from, slash);
    const reason = tracked && AMBIGUOUS_DIRS.has(dir) ? undefined : skipDirectory(dir);
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

const GENERATED_MARK =
  /auto-?generated|automatically generated|generated (?:by|from|with|using)\b/i;
const DO_NOT_EDIT =
  /do not (?:edit|modify|change)|don't edit|manual changes .{0,40}(?:lost|overwritten)/i;

/**
 * True when one of the first five lines marks the file as generated: "@generated", Go's
 * "Code generated … DO NOT EDIT.", or a generator's note ("autogenerated", "generated by
 * …") together with "do not edit" (protoc, Thrift, OpenAPI and GraphQL generators, Django
 * migrations' "Generated by Django" without it are kept: they are edited by hand).
 */
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
  if (code >= 0) {
    const edit = header.indexOf("DO NOT EDIT", code);
    if (edit >= 0 && header.subarray(code, edit).indexOf(10) < 0) return true;
  }
  const text = header.toString("latin1");
  return GENERATED_MARK.test(text) && DO_NOT_EDIT.test(text);
}

/**
 * True when a file under build/, dist/ or out/ looks like a build's output rather than
 * hand-written code: minified (a very long line early on), bundled (webpack/rollup markers)
 * or mapped to sources.
 */
export function looksBuilt(bytes: Buffer): boolean {
  const head = bytes.subarray(0, 16_384);
  let lineStart = 0;
  for (let i = 0; i < head.length; i++) {
    if (head[i] === 10) {
      if (i - lineStart > 1000) return true;
      lineStart = i + 1;
    }
  }
  if (head.length - lineStart > 1000) return true;
  const text = head.toString("latin1");
  if (
    /__webpack_require__|\/\*{6}\/|\/\/# sourceMappingURL=|System\.register\(|define\(\["require", "exports"/.test(
      text,
    )
  ) {
    return true;
  }
  const tail = bytes.subarray(Math.max(0, bytes.length - 512)).toString("latin1");
  return tail.includes("sourceMappingURL=");
}

/** True when the bytes look binary: a NUL byte in the first 8 KiB. */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8192).indexOf(0) !== -1;
}
