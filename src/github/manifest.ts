import type Router from "@koa/router";
import { Octokit } from "@octokit/rest";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import type { Config } from "../config/env.js";
import { errors } from "../errors.js";
import type { Logger } from "../util/logger.js";
import { registerSecret } from "../util/redact.js";

/*
 * Registering the GitHub App from its manifest, built in (what Probot's setup mode does):
 * with APP_ID unset, GET /github/register serves a page whose form posts the manifest
 * (app.yml with this service's public URL filled in) to GitHub or GHES; GitHub creates the
 * App and sends the browser to GET /github/manifest/callback with a one-time code, which is
 * exchanged for the App's credentials (POST /app-manifests/{code}/conversions). They are
 * written to `.env` (mode 0600, never logged) and the operator restarts the service.
 *
 * Whoever registers first makes the service run as their App, so the flow is the operator's
 * alone: the page needs the setup token printed in the log at start (256 random bits, made
 * anew at each start, compared in constant time), and the callback needs the one-time state
 * that only a page opened with it hands out (Jupyter's login token is the model).
 */

export const REGISTER_PATH = "/github/register";
export const CALLBACK_PATH = "/github/manifest/callback";
/** A registration started on the page must come back within this time. */
const STATE_TTL_MS = 60 * 60 * 1000;
const PLACEHOLDER = "https://foreman.example.com";

export interface ManifestFlowOptions {
  config: Config;
  logger: Logger;
  /** The token the registration page needs (createSetupToken; printed in the log at start). */
  setupToken: string;
  /** The manifest template; `app.yml` of the working directory, else the one shipped here. */
  manifestFile?: string;
}

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>foreman: ${escapeHtml(title)}</title></head>
<body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

/** A new setup token for the registration page: 256 random bits, hex. */
export function createSetupToken(): string {
  return randomBytes(32).toString("hex");
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/** Why the registration pages refuse a request without the setup token or its state. */
const NEEDS_TOKEN = `Registering the GitHub App needs this server's setup token: open the address printed in the service's log at start ("GitHub App not configured: open …${REGISTER_PATH}?token=… to register it").`;

function defaultManifestFile(): string {
  const local = path.resolve("app.yml");
  if (existsSync(local)) return local;
  // src/github or dist/github → the package root, where app.yml ships.
  return fileURLToPath(new URL("../../app.yml", import.meta.url));
}

/**
 * The manifest GitHub receives: app.yml with every URL pointing at `baseUrl` (the webhook
 * at WEBHOOK_PATH, the OAuth callback and setup URL at /github/setup) and `redirect_url` at
 * the callback of this flow.
 */
export function buildManifest(
  template: string,
  baseUrl: string,
  webhookPath: string,
): Record<string, unknown> {
  const manifest = parseYaml(template) as Record<string, unknown>;
  const at = (value: unknown) =>
    typeof value === "string" ? value.replace(PLACEHOLDER, baseUrl) : value;
  const hook = (manifest.hook_attributes ?? {}) as Record<string, unknown>;
  return {
    ...manifest,
    url: at(manifest.url ?? PLACEHOLDER),
    hook_attributes: { ...hook, url: `${baseUrl}${webhookPath}` },
    redirect_url: `${baseUrl}${CALLBACK_PATH}`,
    callback_urls: Array.isArray(manifest.callback_urls)
      ? manifest.callback_urls.map(at)
      : [`${baseUrl}/github/setup`],
    ...(manifest.setup_url ? { setup_url: at(manifest.setup_url) } : {}),
  };
}

/** Sets `values` in a dotenv file, keeping its other lines; written whole, mode 0600. */
export async function writeEnvValues(file: string, values: Record<string, string>): Promise<void> {
  let existing = "";
  try {
    existing = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const names = new Set(Object.keys(values));
  const kept = existing
    .split("\n")
    .filter((line) => !names.has(/^\s*(?:export\s+)?([\w.-]+)\s*=/.exec(line)?.[1] ?? ""));
  while (kept.length > 0 && kept.at(-1)!.trim() === "") kept.pop();
  const block = Object.entries(values).map(([name, value]) => `${name}=${value}`);
  const text = [
    ...kept,
    ...(kept.length > 0 ? [""] : []),
    `# GitHub App registered ${new Date().toISOString()} (GET ${REGISTER_PATH})`,
    ...block,
    "",
  ].join("\n");
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
}

/** Mounts the registration page and its callback; only for a server without an App. */
export function mountManifestFlow(router: Router, options: ManifestFlowOptions): void {
  const { logger } = options;
  const config = options.config.manifest;
  const envFile = config.envFile;
  // Hashes of equal length, so the comparison takes the same time whatever is sent.
  const tokenDigest = digest(options.setupToken);
  const tokenGiven = (value: unknown) =>
    typeof value === "string" && timingSafeEqual(digest(value), tokenDigest);
  // One-time states of registrations started here (the page's form carries one), by their
  // sha256: a lookup's timing tells nothing about a state handed out.
  const states = new Map<string, number>();
  const stateKey = (state: string) => digest(state).toString("hex");
  let registered: { slug: string; htmlUrl: string } | undefined;

  const baseUrlOf = (origin: string) => (config.publicUrl ?? origin).replace(/\/+$/, "");

  router.get(REGISTER_PATH, async (ctx) => {
    if (!tokenGiven(ctx.query.token)) throw errors.forbidden(NEEDS_TOKEN);
    // The address carries the token: not kept by caches, not sent on as a Referer.
    ctx.set("Cache-Control", "no-store");
    ctx.set("Referrer-Policy", "no-referrer");
    if (registered) {
      ctx.type = "text/html; charset=utf-8";
      ctx.body = page(
        "GitHub App registered",
        `<p>The App <a href="${escapeHtml(registered.htmlUrl)}">${escapeHtml(registered.slug)}</a> was registered and its credentials written to <code>.env</code>. Restart the service to use it.</p>`,
      );
      return;
    }
    const now = Date.now();
    for (const [state, expires] of states) if (expires < now) states.delete(state);
    const state = randomBytes(16).toString("hex");
    states.set(stateKey(state), now + STATE_TTL_MS);
    // protocol and host honour X-Forwarded-* when TRUST_PROXY is set (Koa's `proxy`).
    const baseUrl = baseUrlOf(`${ctx.protocol}://${ctx.host}`);
    const template = await readFile(options.manifestFile ?? defaultManifestFile(), "utf8");
    const manifest = buildManifest(template, baseUrl, config.webhookPath);
    const web = config.webUrl;
    const org = config.org;
    const action = `${web}${org ? `/organizations/${encodeURIComponent(org)}` : ""}/settings/apps/new?state=${state}`;
    ctx.type = "text/html; charset=utf-8";
    ctx.body = page(
      "Register the GitHub App",
      `<p>No GitHub App is configured (APP_ID is unset). Registering one on <strong>${escapeHtml(
        web,
      )}</strong>${org ? ` for the organization <strong>${escapeHtml(org)}</strong>` : ""} takes one click; GitHub then sends you back here and the credentials are written to <code>.env</code>.</p>
<p>The App will send webhooks to <code>${escapeHtml(`${baseUrl}${config.webhookPath}`)}</code>. If that is not the address GitHub can reach, set PUBLIC_URL and reload this page.</p>
<form action="${escapeHtml(action)}" method="post">
<input type="hidden" name="manifest" value="${escapeHtml(JSON.stringify(manifest))}">
<button type="submit">Register on GitHub</button>
</form>`,
    );
  });

  router.get(CALLBACK_PATH, async (ctx) => {
    const code = typeof ctx.query.code === "string" ? ctx.query.code : "";
    const state = typeof ctx.query.state === "string" ? ctx.query.state : "";
    // The state first: only a page opened with the setup token hands one out.
    const key = stateKey(state);
    const expires = states.get(key);
    if (expires === undefined || expires < Date.now())
      throw errors.forbidden(
        `Unknown or expired registration: start again at ${REGISTER_PATH}. ${NEEDS_TOKEN}`,
      );
    if (!/^[\w-]{1,200}$/.test(code))
      throw errors.validation([
        { path: "query.code", message: "GitHub's one-time code is missing." },
      ]);
    states.delete(key);
    let app;
    try {
      const octokit = new Octokit({ baseUrl: config.apiUrl, request: { retries: 0 } });
      ({ data: app } = await octokit.rest.apps.createFromManifest({ code }));
    } catch (error) {
      const status = (error as { status?: number }).status;
      logger.warn({ status }, "GitHub refused the App manifest code");
      throw errors.upstream(
        `GitHub did not exchange the code (${status ?? "no answer"}); codes work once and for one hour: start again at ${REGISTER_PATH}.`,
      );
    }
    const pem = app.pem;
    const secrets = [pem, app.webhook_secret ?? "", app.client_secret];
    for (const secret of secrets) if (secret) registerSecret(secret);
    await writeEnvValues(envFile, {
      APP_ID: String(app.id),
      // base64: one line, no quoting; read back by @probot/get-private-key (config/env.ts).
      PRIVATE_KEY: Buffer.from(pem).toString("base64"),
      WEBHOOK_SECRET: app.webhook_secret ?? "",
      GITHUB_CLIENT_ID: app.client_id,
      GITHUB_CLIENT_SECRET: app.client_secret,
      ...(app.slug ? { APP_SLUG: app.slug } : {}),
    });
    registered = { slug: app.slug ?? String(app.id), htmlUrl: app.html_url };
    // Registered: no other registration may follow (the service runs as this App next).
    states.clear();
    logger.info(
      { appId: app.id, slug: app.slug, envFile },
      "GitHub App registered; its credentials are in the env file: restart the service",
    );
    ctx.type = "text/html; charset=utf-8";
    ctx.body = page(
      "GitHub App registered",
      `<p>The App <a href="${escapeHtml(app.html_url)}">${escapeHtml(app.name)}</a> exists and its credentials (APP_ID, PRIVATE_KEY, WEBHOOK_SECRET, GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET) were written to <code>${escapeHtml(envFile)}</code>.</p>
<p><strong>Restart the service</strong> to use them, then <a href="${escapeHtml(`${app.html_url}/installations/new`)}">install the App</a> on your repositories.</p>`,
    );
  });
}
