import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type nock from "nock";

/*
 * Checks outgoing GitHub requests against GitHub's published REST description
 * (@octokit/openapi): the method and path must name a known operation, the query and path
 * parameters must fit their schemas, and a JSON body must fit the operation's request body.
 * Requests under `/api/v3` are GitHub Enterprise Server requests (the prefix is stripped and
 * the GHES description is used). The descriptions are parsed once per test process and each
 * operation's validators are compiled the first time it is seen.
 */

/** One request as it left the process. */
export interface GithubRequest {
  method: string;
  /** The full URL, query included. */
  url: string;
  /** The body as sent (a JSON string), already parsed, or absent. */
  body?: unknown;
}

export interface GithubRequestCheck {
  ok: boolean;
  /** GitHub's operation id (`issues/create-comment`), when the path names one. */
  operationId?: string;
  /** One sentence per problem found; empty when `ok`. */
  problems: string[];
}

export interface CheckOptions {
  /** The GHES description for `/api/v3` requests; default: the newest one installed. */
  ghesVersion?: string;
}

// ajv-formats is CommonJS: its function is `.default` at run time under some loaders.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

const require = createRequire(import.meta.url);
const GENERATED = path.join(
  path.dirname(require.resolve("@octokit/openapi/package.json")),
  "generated",
);
const METHODS = ["get", "put", "post", "patch", "delete", "head", "options"] as const;
const COMPONENTS_ID = "https://openapi.github.invalid/components.json";

type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: "query" | "path" | "header" | "cookie";
  required?: boolean;
  schema?: Json;
}

interface Operation {
  operationId?: string;
  parameters?: Array<Parameter | { $ref: string }>;
  requestBody?:
    { required?: boolean; content?: Record<string, { schema?: Json }> } | { $ref: string };
}

interface Route {
  method: string;
  template: string;
  /** Matches with each parameter inside one path segment, and with parameters spanning '/'. */
  exact: RegExp;
  loose: RegExp;
  params: string[];
  /** More literal characters: a more specific template (`/issues/comments` over `/issues/{n}`). */
  literal: number;
  operation: Operation;
}

interface CompiledOperation {
  body?: ValidateFunction;
  bodyRequired: boolean;
  /** The operation accepts JSON bodies only. */
  onlyJson: boolean;
  takesBody: boolean;
  query: Map<string, { required: boolean; validate: ValidateFunction }>;
  path: Map<string, ValidateFunction>;
}

interface Description {
  name: string;
  doc: { paths: Record<string, Record<string, Operation>>; components: Json };
  routes: Route[];
  /** Validators for request bodies (strict types) and for parameters (strings coerced). */
  ajv: Ajv;
  coercing: Ajv;
  compiled: Map<Route, CompiledOperation>;
}

const descriptions = new Map<string, Description>();

/** The newest GHES description installed, e.g. `3.19`. */
function newestGhes(): string {
  const versions = readdirSync(GENERATED)
    .map((f) => /^ghes-(\d+)\.(\d+)\.json$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [Number(m[1]), Number(m[2])] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const last = versions.at(-1);
  if (!last) throw new Error(`no GHES description in ${GENERATED}`);
  return `${last[0]}.${last[1]}`;
}

/**
 * OpenAPI 3.0 to what ajv reads: `nullable` without a `type` becomes `anyOf` with null,
 * a nullable `enum` admits null, and local `$ref`s point at the shared components document.
 */
function adapt(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(adapt);
  if (!node || typeof node !== "object") return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === "$ref" && typeof value === "string" && value.startsWith("#/components/"))
      out[key] = `${COMPONENTS_ID}${value}`;
    else out[key] = adapt(value);
  }
  if (out.nullable === true) {
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    if (out.type === undefined) {
      delete out.nullable;
      return { anyOf: [out, { type: "null" }] };
    }
  } else if (out.nullable === false) delete out.nullable;
  return out;
}

/**
 * Unknown fields in a request body are mistakes GitHub silently ignores: object schemas
 * reached through `properties`/`items` (not through composition or `$ref`, which responses
 * share) refuse properties they do not declare.
 */
function closeObjects(schema: Json): Json {
  if (schema.allOf || schema.anyOf || schema.oneOf || schema.$ref) return schema;
  const out: Json = { ...schema };
  if (out.properties && typeof out.properties === "object") {
    out.properties = Object.fromEntries(
      Object.entries(out.properties as Record<string, Json>).map(([k, v]) => [k, closeObjects(v)]),
    );
    if (out.additionalProperties === undefined && out.patternProperties === undefined)
      out.additionalProperties = false;
  }
  if (out.items && typeof out.items === "object" && !Array.isArray(out.items))
    out.items = closeObjects(out.items as Json);
  return out;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

const SLASHED_PARAMS = new Set([
  "path",
  "ref",
  "branch",
  "basehead",
  "file_path",
  "environment_name",
]);

function buildRoutes(paths: Record<string, Record<string, Operation>>): Route[] {
  const routes: Route[] = [];
  for (const [template, item] of Object.entries(paths)) {
    const params: string[] = [];
    const parts = template.split(/(\{[^}]+\})/).filter(Boolean);
    let exact = "";
    let loose = "";
    let literal = 0;
    parts.forEach((part, i) => {
      const param = /^\{([^}]+)\}$/.exec(part);
      if (param) {
        params.push(param[1]!);
        exact += "([^/]+)";
        // Only a trailing file path or git ref may contain '/' (contents/{path}, git/refs/{ref}).
        loose += i === parts.length - 1 && SLASHED_PARAMS.has(param[1]!) ? "(.+)" : "([^/]+)";
      } else {
        exact += escapeRegex(part);
        loose += escapeRegex(part);
        literal += part.length;
      }
    });
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      routes.push({
        method: method.toUpperCase(),
        template,
        exact: new RegExp(`^${exact}$`),
        loose: new RegExp(`^${loose}$`),
        params,
        literal,
        operation,
      });
    }
  }
  return routes;
}

function load(name: string): Description {
  const cached = descriptions.get(name);
  if (cached) return cached;
  const doc = JSON.parse(
    readFileSync(path.join(GENERATED, `${name}.json`), "utf8"),
  ) as Description["doc"];
  const components = adapt(doc.components) as Json;
  // Formats of GitHub's own that ajv-formats does not know are accepted as they are.
  const formats = new Set<string>();
  (function collect(node: unknown): void {
    if (Array.isArray(node)) return node.forEach(collect);
    if (!node || typeof node !== "object") return;
    const format = (node as Json).format;
    if (typeof format === "string") formats.add(format);
    Object.values(node as Json).forEach(collect);
  })([doc.paths, components]);
  const make = (coerce: boolean): Ajv => {
    const ajv = new Ajv({
      strict: false,
      allErrors: true,
      logger: false,
      validateSchema: false,
      coerceTypes: coerce ? "array" : false,
    });
    addFormats(ajv);
    for (const format of formats) if (!ajv.formats[format]) ajv.addFormat(format, true);
    ajv.addSchema({ $id: COMPONENTS_ID, components });
    return ajv;
  };
  const description: Description = {
    name,
    doc,
    routes: buildRoutes(doc.paths),
    ajv: make(false),
    coercing: make(true),
    compiled: new Map(),
  };
  descriptions.set(name, description);
  return description;
}

/** Follows a local `$ref` (`#/components/parameters/per-page`) in the raw document. */
function resolveLocal<T>(doc: Description["doc"], value: T | { $ref: string }): T {
  let current: unknown = value;
  for (let i = 0; i < 10 && current && typeof current === "object" && "$ref" in current; i++) {
    const ref = (current as { $ref: string }).$ref;
    if (!ref.startsWith("#/")) throw new Error(`unsupported $ref ${ref}`);
    current = ref
      .slice(2)
      .split("/")
      .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
  }
  return current as T;
}

function compile(description: Description, route: Route): CompiledOperation {
  const cached = description.compiled.get(route);
  if (cached) return cached;
  const { doc, ajv, coercing } = description;
  const query = new Map<string, { required: boolean; validate: ValidateFunction }>();
  const pathParams = new Map<string, ValidateFunction>();
  for (const raw of route.operation.parameters ?? []) {
    const param = resolveLocal<Parameter>(doc, raw);
    const schema = adapt(param.schema ?? {}) as Json;
    if (param.in === "query")
      query.set(param.name, {
        required: param.required === true,
        validate: coercing.compile(schema),
      });
    else if (param.in === "path") pathParams.set(param.name, coercing.compile(schema));
  }
  const requestBody = route.operation.requestBody
    ? resolveLocal<Exclude<Operation["requestBody"], { $ref: string } | undefined>>(
        doc,
        route.operation.requestBody,
      )
    : undefined;
  const jsonSchema = requestBody?.content?.["application/json"]?.schema;
  const compiled: CompiledOperation = {
    bodyRequired: requestBody?.required === true,
    onlyJson: jsonSchema !== undefined && Object.keys(requestBody?.content ?? {}).length === 1,
    takesBody: requestBody !== undefined,
    query,
    path: pathParams,
    ...(jsonSchema ? { body: ajv.compile(closeObjects(adapt(jsonSchema) as Json)) } : {}),
  };
  description.compiled.set(route, compiled);
  return compiled;
}

function describeErrors(validate: ValidateFunction, where: string): string[] {
  return (validate.errors ?? []).map((e) => {
    const at = `${where}${e.instancePath}`;
    if (e.keyword === "additionalProperties")
      return `${at}: unknown field "${(e.params as { additionalProperty: string }).additionalProperty}"`;
    if (e.keyword === "enum")
      return `${at}: must be one of ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`;
    return `${at}: ${e.message ?? e.keyword}`;
  });
}

/** OAuth endpoints of the web host: not part of the REST description, checked here. */
const OAUTH_TOKEN_BODY = {
  type: "object",
  properties: {
    client_id: { type: "string", minLength: 1 },
    client_secret: { type: "string", minLength: 1 },
    code: { type: "string", minLength: 1 },
    redirect_uri: { type: "string", format: "uri" },
    repository_id: { type: "string" },
    code_verifier: { type: "string" },
  },
  required: ["client_id", "client_secret", "code"],
  additionalProperties: false,
};
let oauthValidator: ValidateFunction | undefined;

function parseBody(body: unknown): { value: unknown; json: boolean; empty: boolean } {
  if (body === undefined || body === null || body === "")
    return { value: undefined, json: false, empty: true };
  if (typeof body !== "string") return { value: body, json: true, empty: false };
  try {
    return { value: JSON.parse(body), json: true, empty: false };
  } catch {
    return { value: body, json: false, empty: false };
  }
}

function checkOauth(method: string, body: unknown): GithubRequestCheck {
  const problems: string[] = [];
  if (method !== "POST") problems.push(`${method} /login/oauth/access_token: GitHub expects POST`);
  const parsed = parseBody(body);
  if (!parsed.json) problems.push("the OAuth token exchange must send a JSON body");
  else {
    if (!oauthValidator) {
      const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
      addFormats(ajv);
      oauthValidator = ajv.compile(OAUTH_TOKEN_BODY);
    }
    if (!oauthValidator(parsed.value)) problems.push(...describeErrors(oauthValidator, "body"));
  }
  return { ok: problems.length === 0, operationId: "oauth/access-token", problems };
}

/**
 * Checks one request against GitHub's REST description. Requests under `/api/v3` are checked
 * against the GHES description; `POST /login/oauth/access_token` (the web host's token
 * exchange) against the parameters GitHub documents for it.
 */
export function checkGithubRequest(
  request: GithubRequest,
  options: CheckOptions = {},
): GithubRequestCheck {
  const method = request.method.toUpperCase();
  const url = new URL(request.url);
  let pathname = url.pathname;
  let name = "api.github.com";
  if (pathname === "/api/v3" || pathname.startsWith("/api/v3/")) {
    pathname = pathname.slice("/api/v3".length) || "/";
    name = `ghes-${options.ghesVersion ?? newestGhes()}`;
  }
  if (pathname === "/login/oauth/access_token") return checkOauth(method, request.body);
  if (pathname.length > 1) pathname = pathname.replace(/\/+$/, "");

  const description = load(name);
  const candidates = description.routes.filter((r) => r.method === method);
  const pick = (which: "exact" | "loose") =>
    candidates
      .map((route) => ({ route, match: route[which].exec(pathname) }))
      .filter((c): c is { route: Route; match: RegExpExecArray } => c.match !== null)
      .sort((a, b) => b.route.literal - a.route.literal)[0];
  const found = pick("exact") ?? pick("loose");
  if (!found) {
    const otherMethods = description.routes
      .filter((r) => r.method !== method && (r.exact.test(pathname) || r.loose.test(pathname)))
      .map((r) => r.method);
    return {
      ok: false,
      problems: [
        otherMethods.length > 0
          ? `${method} ${pathname}: the path exists in ${name} only for ${[...new Set(otherMethods)].join(", ")}`
          : `${method} ${pathname}: no operation of ${name} has this path`,
      ],
    };
  }
  const { route, match } = found;
  const operationId = route.operation.operationId;
  const compiled = compile(description, route);
  const problems: string[] = [];

  route.params.forEach((param, i) => {
    const validate = compiled.path.get(param);
    let value = match[i + 1] ?? "";
    try {
      value = decodeURIComponent(value);
    } catch {
      problems.push(`path.${param}: not a valid percent-encoded value`);
    }
    if (validate && !validate(value)) problems.push(...describeErrors(validate, `path.${param}`));
  });

  const seen = new Set<string>();
  for (const [key, value] of url.searchParams) {
    seen.add(key);
    const param = compiled.query.get(key);
    if (!param) {
      problems.push(`query.${key}: not a parameter of ${operationId ?? route.template}`);
      continue;
    }
    if (!param.validate(value)) problems.push(...describeErrors(param.validate, `query.${key}`));
  }
  for (const [key, param] of compiled.query)
    if (param.required && !seen.has(key)) problems.push(`query.${key}: required`);

  const body = parseBody(request.body);
  if (!body.empty) {
    if (!compiled.takesBody)
      problems.push(`${operationId ?? route.template} takes no request body`);
    else if (!body.json) {
      if (compiled.onlyJson) problems.push("the body is not JSON");
    } else if (compiled.body && !compiled.body(body.value))
      problems.push(...describeErrors(compiled.body, "body"));
  } else if (compiled.bodyRequired)
    problems.push(`${operationId ?? route.template}: a request body is required`);

  return { ok: problems.length === 0, ...(operationId ? { operationId } : {}), problems };
}

/** Throws with every problem when the request does not fit GitHub's REST description. */
export function assertGithubRequest(request: GithubRequest, options?: CheckOptions): void {
  const check = checkGithubRequest(request, options);
  if (!check.ok)
    throw new Error(
      `${request.method.toUpperCase()} ${request.url} does not fit GitHub's REST description:\n- ${check.problems.join("\n- ")}`,
    );
}

/* nock integration: scopes that record what they intercept, checked in afterEach. */

export interface RecordedGithubRequest extends GithubRequest {
  check: GithubRequestCheck;
}

const recorded: RecordedGithubRequest[] = [];

/**
 * Records every request `scope` intercepts (and checks it against GitHub's description);
 * returns the scope, so it wraps a chain: `watchGithub(nock(api).get(...).reply(...))`.
 */
export function watchGithub<T extends nock.Scope>(scope: T, options?: CheckOptions): T {
  scope.on(
    "request",
    (
      req: { method?: string; path?: string },
      interceptor: { basePath?: string },
      body?: string,
    ) => {
      const url = new URL(
        req.path ?? "/",
        String(interceptor.basePath ?? "http://invalid"),
      ).toString();
      const request: GithubRequest = { method: req.method ?? "GET", url, body };
      recorded.push({ ...request, check: checkGithubRequest(request, options) });
    },
  );
  return scope;
}

/** The requests watched scopes intercepted since the last `expectValidGithubRequests`. */
export function githubRequests(): RecordedGithubRequest[] {
  return [...recorded];
}

/**
 * Throws when a request intercepted by a watched scope does not fit GitHub's REST
 * description, then forgets them all. Call it in `afterEach` (and wherever a test wants
 * the check earlier).
 */
export function expectValidGithubRequests(): void {
  const bad = recorded.filter((r) => !r.check.ok);
  recorded.length = 0;
  if (bad.length > 0)
    throw new Error(
      `GitHub requests that do not fit GitHub's REST description:\n${bad
        .map((r) => `${r.method} ${r.url}\n  - ${r.check.problems.join("\n  - ")}`)
        .join("\n")}`,
    );
}
