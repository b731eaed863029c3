import { send } from "@koa/send";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Middleware } from "koa";

/** Where `npm run build` puts the dashboard (web/ built by Vite), beside the server code. */
export const DASHBOARD_DIR = fileURLToPath(new URL("../../dist/dashboard", import.meta.url));

const PREFIX = "/dashboard";

/*
 * The dashboard, same origin as the API: GET / redirects to /dashboard/; hashed assets are
 * served precompressed (.br/.gz written by the build) and cached for a year; every other path
 * under /dashboard/ is the single page (its router reads the path), never cached, so a new
 * build is picked up at once. Security headers keep the page from being framed and allow
 * scripts and connections (WebSocket included) to this origin only.
 */
export function dashboard(dir = DASHBOARD_DIR): Middleware {
  const built = existsSync(path.join(dir, "index.html"));
  return async (ctx, next) => {
    if (ctx.method !== "GET" && ctx.method !== "HEAD") return next();
    if (ctx.path === "/") {
      ctx.redirect(PREFIX + "/");
      return;
    }
    // Browsers ask for /favicon.ico at the root whatever the page says.
    if (ctx.path === "/favicon.ico" && built) {
      await send(ctx, "favicon.ico", { root: dir, maxage: 7 * 24 * 3600 * 1000 });
      return;
    }
    if (ctx.path !== PREFIX && !ctx.path.startsWith(PREFIX + "/")) return next();
    ctx.set("X-Content-Type-Options", "nosniff");
    ctx.set("X-Frame-Options", "DENY");
    ctx.set("Referrer-Policy", "no-referrer");
    ctx.set(
      "Content-Security-Policy",
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    if (!built) {
      ctx.status = 503;
      ctx.type = "text/plain";
      ctx.body = "The dashboard is not built: run `npm run build` (npm start does it).";
      return;
    }
    const rel = ctx.path.slice(PREFIX.length).replace(/^\/+/, "");
    if (rel === "favicon.svg" || rel === "favicon.ico") {
      await send(ctx, rel, { root: dir, maxage: 7 * 24 * 3600 * 1000 });
      return;
    }
    if (rel.startsWith("assets/")) {
      try {
        await send(ctx, rel, {
          root: dir,
          immutable: true,
          maxage: 365 * 24 * 3600 * 1000,
          brotli: true,
          gzip: true,
        });
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 404) throw err;
        ctx.status = 404;
        ctx.type = "text/plain";
        ctx.body = "Not found";
        return;
      }
    }
    ctx.set("Cache-Control", "no-cache");
    await send(ctx, "index.html", { root: dir, brotli: true, gzip: true });
  };
}
