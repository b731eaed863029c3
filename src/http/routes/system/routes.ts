import { z } from "zod";
import { pingDatabase } from "../../../db/connection.js";
import { errors } from "../../../errors.js";
import { route } from "../../route.js";

export const systemRoutes = [
  route({
    method: "get",
    path: "/healthz",
    operationId: "healthz",
    tag: "system",
    summary: "Liveness: the process is up",
    auth: "none",
    status: 200,
    response: { description: "Up", schema: z.object({ status: z.literal("ok") }) },
    async handler() {
      return { status: "ok" as const };
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
