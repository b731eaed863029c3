import { z } from "zod";
import { velocity, velocityTimeline } from "../../../domain/analytics.js";
import { route, type AnyRoute } from "../../route.js";
import { periodQuery, timelineRow, velocityReport } from "./schema.js";

export const analyticsRoutes: AnyRoute[] = [
  route({
    method: "get",
    path: "/analytics/velocity",
    operationId: "getVelocity",
    tag: "analytics",
    summary: "Velocity of the account's tasks over 7, 30 or 90 days",
    description:
      "Counts, success rate, median and p90 duration, pull requests opened and merged, cost, overall and per agent, of the tasks created in the period (the last `period` UTC days, today included). Any other `period`: 400.",
    auth: "key",
    query: periodQuery,
    status: 200,
    response: { description: "The figures", schema: velocityReport },
    async handler(_ctx, { query, principal, deps }) {
      return velocity(deps.models, principal.accountId, query.period);
    },
  }),
  route({
    method: "get",
    path: "/analytics/velocity/timeline",
    operationId: "getVelocityTimeline",
    tag: "analytics",
    summary: "One row per UTC day of the period, oldest first",
    description:
      "Days without tasks are included (zero rows); each task counts on the day it was created.",
    auth: "key",
    query: periodQuery,
    status: 200,
    response: { description: "Days, oldest first", schema: z.array(timelineRow) },
    async handler(_ctx, { query, principal, deps }) {
      return velocityTimeline(deps.models, principal.accountId, query.period);
    },
  }),
];
