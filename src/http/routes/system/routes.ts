import { z } from "zod";
import { pingDatabase } from "../../../db/connection.js";
import { errors } from "../../../errors.js";
import { route } from "../../route.js";

/**
 * How long the embedded database may stay down before /healthz fails: its keeper restarts
 * it within seconds (src/db/embedded.ts), so a longer outage means this process cannot
 * recover by itself and its supervisor should restart it.
 */
export const EMBEDDED_DOWN_LIMIT_MS = 60_000;
/** When each connection's database was first seen down by /healthz (cleared when back). */
const downSince = new WeakMap<object, number>();

export const systemRoutes = [
  route({
    method: "get",
    path: "/healthz",
    operationId: "healthz",
    tag: "system",
    summary: "Liveness: the process is up and can recover by itself",
    description:
      '200 while the process serves HTTP and can recover by itself; `database` says whether the database answers a ping now. With the embedded database, 503 `upstream_unavailable` once it has been down for 60 s (its watchdog restarts it within seconds, so the process needs a restart). With MONGODB_URI, a database outage keeps 200 with `database: "down"`: restarting this process would not bring it back; /readyz takes the process out of rotation meanwhile.',
    auth: "none",
    status: 200,
    response: {
      description: "Up",
      schema: z.object({ status: z.literal("ok"), database: z.enum(["ok", "down"]) }),
    },
    errors: [503],
    async handler(_ctx, { deps }) {
      const { connection, embedded } = deps.db;
      if (await pingDatabase(connection)) {
        downSince.delete(connection);
        return { status: "ok" as const, database: "ok" as const };
      }
      const since = downSince.get(connection) ?? Date.now();
      downSince.set(connection, since);
      const downMs = Date.now() - since;
      if (embedded && downMs >= EMBEDDED_DOWN_LIMIT_MS)
        throw errors.upstream(
          `The embedded database has not answered for ${Math.round(downMs / 1000)} s and was not restarted; restart this process.`,
          503,
        );
      return { status: "ok" as const, database: "down" as const };
    },
  }),
  route({
    method: "get",
    path: "/readyz",
    operationId: "readyz",
    tag: "system",
    summary: "Readiness: the database answers",
    auth: "none",
    status: 200,
    response: {
      description: "Ready",
      schema: z.object({ status: z.literal("ready"), database: z.literal("ok") }),
    },
    errors: [503],
    async handler(_ctx, { deps }) {
      if (!(await pingDatabase(deps.db.connection)))
        throw errors.notReady("The database does not answer.");
      return { status: "ready" as const, database: "ok" as const };
    },
  }),
];
