import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { podRuleProblems } from "../../scripts/kubernetes-rules.mjs";
import { loadConfig } from "../../src/config/env.js";

/*
 * The deployment examples are safe for the network as shipped (issue 40, "Operator
 * defaults"): compose publishes the API to this host only, the containers' HOST 0.0.0.0
 * keeps open sign-up off, and the Kubernetes worker passes the pod rules the API server
 * enforces beyond the schemas (scripts/kubernetes-rules.mjs; the schemas themselves are
 * checked by scripts/validate-kubernetes.mjs, which needs the kubernetes-models package).
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

/** Compose's `${VAR:-default}` / `${VAR}` interpolation with the given environment. */
function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$\{(\w+)(?::?-([^}]*))?\}/g, (_, name: string, fallback?: string) =>
    env[name] ? env[name] : (fallback ?? ""),
  );
}

interface ComposeService {
  ports?: string[];
  environment?: Record<string, string>;
}

function services(env: Record<string, string>): Record<string, ComposeService> {
  return (
    parse(interpolate(read("compose.yaml"), env)) as { services: Record<string, ComposeService> }
  ).services;
}

describe("compose.yaml", () => {
  it("publishes the API on 127.0.0.1 unless FOREMAN_PUBLISH says otherwise", () => {
    const published = Object.values(services({})).flatMap((s) => s.ports ?? []);
    expect(published).toEqual(["127.0.0.1:3000:3000"]);
    expect(services({ FOREMAN_PUBLISH: "0.0.0.0:8080" }).web?.ports).toEqual(["0.0.0.0:8080:3000"]);
  });

  it("starts the web with open sign-up off (.env.example leaves OPEN_SIGNUP unset)", () => {
    const web = services({}).web!;
    expect(web.environment?.OPEN_SIGNUP).toBeUndefined();
    expect(read(".env.example")).toMatch(/^# OPEN_SIGNUP=$/m);
    expect(loadConfig({ ...web.environment }).openSignup).toBe(false);
  });
});

describe("deploy/kubernetes", () => {
  const docs = parseAllDocuments(read("deploy/kubernetes/foreman.yaml")).map(
    (d) => d.toJS() as { kind: string; metadata: { name: string }; spec: any }, // eslint-disable-line @typescript-eslint/no-explicit-any
  );

  it("passes the API server's pod rules: procMount Unmasked only with hostUsers false", () => {
    expect(docs.map((d) => [d.metadata.name, podRuleProblems(d)])).toEqual(
      docs.map((d) => [d.metadata.name, []]),
    );
    const worker = docs.find((d) => d.metadata.name === "foreman-worker")!;
    expect(worker.spec.template.spec.hostUsers).toBe(false);
    expect(worker.spec.template.spec.containers[0].securityContext.procMount).toBe("Unmasked");
  });

  it("the rule finds what the API server refuses", () => {
    const pod = {
      kind: "Pod",
      spec: { containers: [{ name: "w", securityContext: { procMount: "Unmasked" } }] },
    };
    expect(podRuleProblems(pod)).toEqual([
      'spec.containers[0].securityContext.procMount: Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
    ]);
    expect(podRuleProblems({ ...pod, spec: { ...pod.spec, hostUsers: false } })).toEqual([]);
    expect(
      podRuleProblems({ ...pod, spec: { ...pod.spec, hostUsers: false, hostNetwork: true } }),
    ).toEqual(["spec.hostNetwork: Forbidden: when `hostUsers` is false"]);
  });

  it("starts the web with open sign-up off", () => {
    const web = docs.find((d) => d.kind === "Deployment" && d.metadata.name === "foreman-web")!;
    const env = Object.fromEntries(
      (web.spec.template.spec.containers[0].env as Array<{ name: string; value: string }>).map(
        (e) => [e.name, e.value],
      ),
    );
    expect(loadConfig(env).openSignup).toBe(false);
  });
});
