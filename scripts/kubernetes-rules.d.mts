/** Types of scripts/kubernetes-rules.mjs (a plain script: node runs it without a build). */
export function podSpecOf(obj: unknown): Record<string, unknown> | undefined;
export function podRuleProblems(obj: unknown): string[];
