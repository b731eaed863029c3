/*
 * Package registries and advisory sources, asked over HTTP with bounds: at most
 * `maxRequests` requests per scan, `concurrency` at once, each limited to `timeoutMs`.
 * npm (NPM_REGISTRY_URL), PyPI (PYPI_URL) and the Go module proxy (GOPROXY_URL) give the
 * latest versions (npm's as `npm outdated` picks it, see `latest`); npm's bulk advisory endpoint and OSV (OSV_URL, for PyPI and Go) give
 * known vulnerabilities. A failure is a value (`{ error }`), never an exception: the
 * metrics say what could not be checked.
 */
import pickManifest from "npm-pick-manifest";
import semver from "semver";
import type { Config } from "../config/env.js";
import type { Ecosystem } from "./manifests.js";

/** The registries asked and the limits (HEALTH_* configuration). */
export type RegistryConfig = Config["health"]["registry"];

export type Fetched<T> = { ok: true; value: T } | { ok: false; error: string };

export class RegistryClient {
  private used = 0;
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  /**
   * `nodeVersion`: the Node.js the repository's commands run under (the sandbox mounts the
   * service's own node), for npm's engine-aware choice of the latest version.
   */
  constructor(
    readonly config: RegistryConfig,
    private readonly signal?: AbortSignal,
    readonly nodeVersion: string = process.version,
  ) {}

  /** Requests made so far. */
  get requests(): number {
    return this.used;
  }

  private async slot(): Promise<() => void> {
    if (this.active >= this.config.concurrency)
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    return () => {
      this.active--;
      this.waiting.shift()?.();
    };
  }

  /** A JSON answer, or why there is none (budget, timeout, status, network, bad JSON). */
  async json<T>(
    url: string,
    init: { method?: string; body?: unknown; accept?: string } = {},
  ): Promise<Fetched<T>> {
    return this.request(url, init, async (response) => {
      try {
        return { ok: true, value: (await response.json()) as T };
      } catch {
        return { ok: false, error: `${hostOf(url)} answered with invalid JSON` };
      }
    });
  }

  /** A plain-text answer (the Go proxy's version lists), or why there is none. */
  async text(url: string): Promise<Fetched<string>> {
    return this.request(url, { accept: "text/plain" }, async (response) => ({
      ok: true,
      value: await response.text(),
    }));
  }

  private async request<T>(
    url: string,
    init: { method?: string; body?: unknown; accept?: string },
    read: (response: Response) => Promise<Fetched<T>>,
  ): Promise<Fetched<T>> {
    if (this.used >= this.config.maxRequests)
      return {
        ok: false,
        error: `the limit of ${this.config.maxRequests} registry requests per scan was reached`,
      };
    this.used++;
    const release = await this.slot();
    try {
      const signals = [AbortSignal.timeout(this.config.timeoutMs)];
      if (this.signal) signals.push(this.signal);
      const response = await fetch(url, {
        method: init.method ?? "GET",
        headers: {
          accept: init.accept ?? "application/json",
          ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
          "user-agent": "foreman-health-scan",
        },
        body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
        signal: AbortSignal.any(signals),
        redirect: "follow",
      });
      if (!response.ok) {
        await response.body?.cancel().catch(() => undefined);
        return { ok: false, error: `${hostOf(url)} answered ${response.status}` };
      }
      return await read(response);
    } catch (error) {
      const name = (error as Error).name;
      if (name === "TimeoutError")
        return {
          ok: false,
          error: `${hostOf(url)} did not answer within ${this.config.timeoutMs} ms`,
        };
      if (this.signal?.aborted) return { ok: false, error: "the scan was stopped" };
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      return { ok: false, error: `${hostOf(url)} is unreachable${cause ? ` (${cause})` : ""}` };
    } finally {
      release();
    }
  }

  /**
   * The latest version a registry offers for a package. For npm it is the version
   * `npm outdated` shows as "latest": npm's own pick (npm-pick-manifest, range `*`) from the
   * packument, which takes the `latest` dist-tag unless that version is deprecated or its
   * `engines.node` excludes `nodeVersion`, and then the highest version that is neither.
   */
  async latest(ecosystem: Ecosystem, name: string): Promise<Fetched<string>> {
    if (ecosystem === "npm") {
      // Scoped names keep their @ and encode the slash, as npm's own client does.
      const encoded = name.startsWith("@")
        ? `@${encodeURIComponent(name.slice(1))}`
        : encodeURIComponent(name);
      // The abbreviated packument (npm's install document) lists every version with its
      // engines and deprecation, which is all the pick needs.
      const answer = await this.json<{
        "dist-tags"?: { latest?: unknown };
        versions?: Record<string, unknown>;
      }>(`${trimSlash(this.config.npmUrl)}/${encoded}`, {
        accept: "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8",
      });
      if (!answer.ok) return answer;
      return npmLatest(answer.value, this.nodeVersion);
    }
    if (ecosystem === "PyPI") {
      const answer = await this.json<{ info?: { version?: unknown } }>(
        `${trimSlash(this.config.pypiUrl)}/pypi/${encodeURIComponent(name)}/json`,
      );
      if (!answer.ok) return answer;
      const version = answer.value.info?.version;
      return typeof version === "string"
        ? { ok: true, value: version }
        : { ok: false, error: "no version in the answer" };
    }
    const base = goproxyBase(this.config.goproxyUrl);
    if (!base)
      return { ok: false, error: `GOPROXY_URL "${this.config.goproxyUrl}" names no proxy URL` };
    // As the go command's "latest" query (what `go list -m -u` reports as Update): the
    // highest version of the module's version list, and the proxy's @latest only when that
    // list is empty (a module with pseudo-versions only).
    const module = `${base}/${escapeModulePath(name)}`;
    const list = await this.text(`${module}/@v/list`);
    if (!list.ok) return list;
    const listed = goLatestOfList(list.value);
    if (listed) return { ok: true, value: listed };
    const answer = await this.json<{ Version?: unknown }>(`${module}/@latest`);
    if (!answer.ok) return answer;
    const version = answer.value.Version;
    return typeof version === "string"
      ? { ok: true, value: version }
      : { ok: false, error: "no Version in the answer" };
  }
}

/**
 * The version the go command takes as "latest" from a proxy's version list: the highest
 * release, else the highest pre-release; +incompatible versions only when the list has no
 * other. Retractions (declared in a later go.mod) are not read. Null for an empty list.
 */
export function goLatestOfList(list: string): string | null {
  const versions = list
    .split(/\s+/)
    .filter((v) => /^v\d+\.\d+\.\d+/.test(v) && semver.valid(v) !== null);
  const pick = (candidates: string[]) =>
    candidates.length === 0 ? null : candidates.sort((a, b) => semver.rcompare(a, b))[0]!;
  const compatible = versions.filter((v) => !v.endsWith("+incompatible"));
  for (const pool of [compatible, versions]) {
    const release = pick(pool.filter((v) => semver.prerelease(v) === null));
    if (release) return release;
    const pre = pick([...pool]);
    if (pre) return pre;
  }
  return null;
}

/** npm's "latest" of a packument for a Node.js version (see RegistryClient.latest). */
export function npmLatest(
  packument: { "dist-tags"?: { latest?: unknown }; versions?: Record<string, unknown> },
  nodeVersion: string,
): Fetched<string> {
  const tagged = packument["dist-tags"]?.latest;
  // A registry that lists no versions (a minimal mirror) leaves only its dist-tag.
  if (Object.keys(packument.versions ?? {}).length === 0)
    return typeof tagged === "string"
      ? { ok: true, value: tagged }
      : { ok: false, error: "no latest dist-tag" };
  try {
    return { ok: true, value: pickManifest(packument, "*", { nodeVersion }).version };
  } catch (error) {
    return { ok: false, error: `no version to pick (${(error as Error).message.slice(0, 200)})` };
  }
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, "");
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "the registry";
  }
}

/** The first URL of a GOPROXY list ("https://proxy.golang.org,direct"), or null. */
export function goproxyBase(value: string): string | null {
  for (const entry of value.split(/[,|]/)) {
    const trimmed = entry.trim();
    if (/^https?:\/\//.test(trimmed)) return trimSlash(trimmed);
  }
  return null;
}

/** Module paths in proxy URLs: upper-case letters become "!" and the lower-case letter. */
export function escapeModulePath(module: string): string {
  return module.replace(/[A-Z]/g, (c) => `!${c.toLowerCase()}`);
}

export type Severity = "critical" | "high" | "moderate" | "low" | "unknown";

export interface Vulnerability {
  ecosystem: Ecosystem;
  package: string;
  version: string;
  id: string;
  severity: Severity;
  title: string;
  url: string | null;
}

export interface AdvisoryCheck {
  ecosystem: Ecosystem;
  source: string;
  available: boolean;
  /** Why the check could not be done (when not available). */
  reason?: string;
  packages_checked: number;
}

function severityOf(value: unknown): Severity {
  const text = String(value ?? "").toLowerCase();
  if (text === "critical" || text === "high" || text === "low") return text;
  if (text === "moderate" || text === "medium") return "moderate";
  return "unknown";
}

const BULK_CHUNK = 500;

/** npm's bulk advisory endpoint for the given exact versions. */
export async function npmAdvisories(
  client: RegistryClient,
  versions: Map<string, Set<string>>,
  satisfies: (version: string, range: string) => boolean,
): Promise<{ check: AdvisoryCheck; vulnerabilities: Vulnerability[] }> {
  const names = [...versions.keys()].sort();
  const check: AdvisoryCheck = {
    ecosystem: "npm",
    source: `${trimSlash(client.config.npmUrl)}/-/npm/v1/security/advisories/bulk`,
    available: true,
    packages_checked: 0,
  };
  const vulnerabilities: Vulnerability[] = [];
  for (let i = 0; i < names.length; i += BULK_CHUNK) {
    const chunk = names.slice(i, i + BULK_CHUNK);
    const body = Object.fromEntries(chunk.map((n) => [n, [...versions.get(n)!]]));
    const answer = await client.json<Record<string, unknown>>(check.source, {
      method: "POST",
      body,
    });
    if (!answer.ok)
      return { check: { ...check, available: false, reason: answer.error }, vulnerabilities: [] };
    check.packages_checked += chunk.length;
    for (const [name, list] of Object.entries(answer.value)) {
      if (!Array.isArray(list)) continue;
      for (const advisory of list as Array<Record<string, unknown>>) {
        const range =
          typeof advisory.vulnerable_versions === "string" ? advisory.vulnerable_versions : "*";
        for (const version of versions.get(name) ?? []) {
          if (!satisfies(version, range)) continue;
          vulnerabilities.push({
            ecosystem: "npm",
            package: name,
            version,
            id: String(advisory.id ?? advisory.url ?? "unknown"),
            severity: severityOf(advisory.severity),
            title: String(advisory.title ?? "").slice(0, 200),
            url: typeof advisory.url === "string" ? advisory.url : null,
          });
        }
      }
    }
  }
  return { check, vulnerabilities };
}

/** OSV's batch query for exact versions (used for PyPI and Go; registry names are OSV's). */
export async function osvAdvisories(
  client: RegistryClient,
  ecosystem: Ecosystem,
  packages: Array<{ name: string; version: string }>,
): Promise<{ check: AdvisoryCheck; vulnerabilities: Vulnerability[] }> {
  const source = `${trimSlash(client.config.osvUrl)}/v1/querybatch`;
  const check: AdvisoryCheck = { ecosystem, source, available: true, packages_checked: 0 };
  const vulnerabilities: Vulnerability[] = [];
  for (let i = 0; i < packages.length; i += BULK_CHUNK) {
    const chunk = packages.slice(i, i + BULK_CHUNK);
    const answer = await client.json<{ results?: Array<{ vulns?: Array<{ id?: unknown }> }> }>(
      source,
      {
        method: "POST",
        body: {
          queries: chunk.map((p) => ({
            package: { name: p.name, ecosystem },
            // OSV wants Go versions without their "v".
            version: ecosystem === "Go" ? p.version.replace(/^v/, "") : p.version,
          })),
        },
      },
    );
    if (!answer.ok)
      return { check: { ...check, available: false, reason: answer.error }, vulnerabilities: [] };
    check.packages_checked += chunk.length;
    (answer.value.results ?? []).forEach((result, index) => {
      const pkg = chunk[index];
      if (!pkg) return;
      for (const vuln of result.vulns ?? []) {
        const id = String(vuln.id ?? "unknown");
        vulnerabilities.push({
          ecosystem,
          package: pkg.name,
          version: pkg.version,
          id,
          // The batch answer carries ids only; severities would take one request each.
          severity: "unknown",
          title: "",
          url: `https://osv.dev/vulnerability/${encodeURIComponent(id)}`,
        });
      }
    });
  }
  return { check, vulnerabilities };
}
