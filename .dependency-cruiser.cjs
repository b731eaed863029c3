/*
 * The layering of docs/architecture.md, checked on every `npm run lint` (and so in CI):
 *
 *   doors      http/  github/  jobs/  cli/  integrations/  mcp/   (and web/, the dashboard)
 *   pipeline   pipeline/
 *   domain     domain/
 *   parts      db/ llm/ indexer/ verify/ health/ tools/ queue/ github-api/ metrics/ text/
 *              sandbox/ workcopy/ util/ config/
 *
 * A layer uses the layers below it, never one above, and a door never another door: the
 * composition root (main.ts, service.ts, context.ts) is the one place that wires doors together.
 */
const DOORS = ["http", "github", "jobs", "cli", "integrations", "mcp"];
/*
 * The REST door's request and response schemas (and their building blocks) are the contract
 * of the API, shared by the MCP door so both validate and describe the same shapes.
 */
const SHARED_CONTRACT = "^src/http/(routes/[^/]+/schema|schemas|paging)\\.ts$";
const door = (name) => `^src/${name}/`;
const otherDoors = (name) => `^src/(${DOORS.filter((d) => d !== name).join("|")})/`;

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "An import cycle: split the shared part into a module both sides import.",
      from: { path: "^src/" },
      to: { circular: true },
    },
    ...DOORS.map((name) => ({
      name: `door-${name}-not-other-doors`,
      severity: "error",
      comment:
        "A door calls the domain (or the pipeline), never another door; service.ts wires them.",
      from: { path: door(name) },
      to: { path: otherDoors(name), ...(name === "mcp" ? { pathNot: SHARED_CONTRACT } : {}) },
    })),
    {
      name: "domain-not-above",
      severity: "error",
      comment: "The domain is used by the pipeline and the doors; it uses neither.",
      from: { path: "^src/domain/" },
      to: { path: `^src/(pipeline|${DOORS.join("|")})/|^src/(service|main|context)\\.ts$` },
    },
    {
      name: "pipeline-not-doors",
      severity: "error",
      comment: "The pipeline uses the domain and the parts, never a door.",
      from: { path: "^src/pipeline/" },
      to: { path: `^src/(${DOORS.join("|")})/|^src/(service|main|context)\\.ts$` },
    },
    {
      name: "parts-not-above",
      severity: "error",
      comment: "The parts below the domain know nothing of the domain, the pipeline or the doors.",
      from: {
        path: "^src/(db|durable|llm|indexer|verify|health|ecosystems|tools|queue|github-api|metrics|text|sandbox|workcopy|util|config)/",
      },
      to: { path: `^src/(domain|pipeline|${DOORS.join("|")})/|^src/(service|main|context)\\.ts$` },
    },
    {
      name: "doors-not-database",
      severity: "error",
      comment:
        "A door reads and writes through the domain, not the models (a type import of Models to pass it on is allowed).",
      from: {
        path: `^src/(${DOORS.join("|")})/`,
        pathNot: "^src/(cli/admin|http/routes/system/routes)\\.ts$",
      },
      // Once-markers, leases and request records live in src/durable/, which doors may use.
      to: { path: "^src/db/", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "readiness-pings-the-database",
      severity: "error",
      comment:
        "The CLI is a composition root like main.ts (it opens its own connection); /readyz pings the database, which is its job. Neither reads or writes models.",
      from: { path: "^src/(cli/admin|http/routes/system/routes)\\.ts$" },
      to: {
        path: "^src/db/(models|insert-batcher|lookup-batcher)\\.ts$",
        dependencyTypesNot: ["type-only"],
      },
    },
    {
      name: "dashboard-only-through-the-api",
      severity: "error",
      comment:
        "The dashboard (web/) talks to the service over HTTP and WebSocket only. It shares the API's response types (type-only) and the task state names, so a change there fails its type check.",
      from: { path: "^web/" },
      to: {
        path: "^src/",
        pathNot: "^src/db/task-states\\.ts$",
        dependencyTypesNot: ["type-only"],
      },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default"],
    },
  },
};
