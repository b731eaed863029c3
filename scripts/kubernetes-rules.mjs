// Pod rules the Kubernetes API server enforces in code (pkg/apis/core/validation), which no
// OpenAPI or JSON schema carries: a manifest can pass kubeconform or kubernetes-models' schema
// validators and still be refused by `kubectl apply`. Used by scripts/validate-kubernetes.mjs
// and test/unit/deploy-defaults.test.ts. Each rule names where it comes from.

/** The pod spec of a Pod or of a workload's pod template, or undefined. */
export function podSpecOf(obj) {
  if (obj?.kind === "Pod") return obj.spec;
  if (obj?.kind === "CronJob") return obj.spec?.jobTemplate?.spec?.template?.spec;
  return obj?.spec?.template?.spec;
}

/**
 * The problems the API server would answer for one document, as
 * `<field path>: <message>` lines (the server's own wording where it has one).
 */
export function podRuleProblems(obj) {
  const spec = podSpecOf(obj);
  if (!spec) return [];
  const problems = [];
  const base = obj.kind === "Pod" ? "spec" : "spec.template.spec";
  // hostUsers lives on the pod spec itself (not in its securityContext).
  const userNamespace = spec.hostUsers === false;
  const groups = ["initContainers", "containers", "ephemeralContainers"];
  for (const group of groups)
    for (const [i, c] of (spec[group] ?? []).entries()) {
      // Kubernetes 1.30+ (kubernetes/kubernetes#123520, KEP-4265): `Invalid value:
      // "Unmasked": `hostUsers` must be false to use `Unmasked``.
      if (c.securityContext?.procMount === "Unmasked" && !userNamespace)
        problems.push(
          `${base}.${group}[${i}].securityContext.procMount: Invalid value: "Unmasked": \`hostUsers\` must be false to use \`Unmasked\``,
        );
    }
  // KEP-127 (validateHostUsers): a pod in its own user namespace shares no other host namespace.
  if (userNamespace)
    for (const field of ["hostNetwork", "hostPID", "hostIPC"])
      if (spec[field] === true)
        problems.push(`${base}.${field}: Forbidden: when \`hostUsers\` is false`);
  return problems;
}
