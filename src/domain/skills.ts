/*
 * Skills: named instruction additions attached to a task (SPEC §6). This module holds the
 * built-ins; account-owned skills and the marketplace are added by the skills issue (#6).
 */

export interface SkillDefinition {
  name: string;
  description: string;
  system_prompt_addition: string;
}

export const BUILTIN_SKILLS: readonly SkillDefinition[] = [
  {
    name: "add-tests",
    description: "Add focused automated tests for the code the task touches.",
    system_prompt_addition:
      "Add automated tests with the repository's existing test framework and layout. Cover the behaviour the task changes, including one failure or edge case per function, and keep tests deterministic (no network, no sleeps, no real clocks). Do not change production code except to make it testable, and say so in the plan when you do.",
  },
  {
    name: "add-openapi-docs",
    description: "Document HTTP endpoints with an OpenAPI description kept next to the code.",
    system_prompt_addition:
      "Document every HTTP endpoint the task touches in the repository's OpenAPI description (create one at the conventional place if none exists): path, method, parameters, request body schema, every response status with its schema, and examples. Derive the schemas from the code's validation, never invent fields.",
  },
  {
    name: "dependency-audit",
    description: "Review dependencies for known vulnerabilities, abandonment and needless weight.",
    system_prompt_addition:
      "Audit the declared dependencies: flag versions with known vulnerabilities, unmaintained packages and dependencies used in one place that the standard library covers. Propose minimal, compatible upgrades, update lockfiles with the repository's own package manager, and never upgrade across a major version without saying why in the plan.",
  },
  {
    name: "add-logging",
    description: "Add structured, useful logging at the boundaries of the code the task touches.",
    system_prompt_addition:
      "Add structured logging with the logger the repository already uses (add none if there is one): one line per request, job or external call at its boundary, with a fixed message and a metadata object. Never log secrets, tokens, passwords or personal data, and do not log inside hot loops.",
  },
  {
    name: "add-error-handling",
    description: "Make failures explicit: validated input, clear errors, no swallowed exceptions.",
    system_prompt_addition:
      "Find places where errors are swallowed, ignored or turned into generic messages and handle them explicitly: validate input at boundaries, raise or return errors that say what failed and what to do, clean up resources on failure, and keep the existing error types and conventions of the repository.",
  },
  {
    name: "refactor-for-readability",
    description: "Simplify code without changing behaviour.",
    system_prompt_addition:
      "Refactor for readability without changing behaviour: smaller functions with clear names, removed duplication and dead code, consistent naming. Keep public interfaces unchanged and rely on the existing tests to prove behaviour is unchanged.",
  },
  {
    name: "performance-pass",
    description: "Find and fix measurable performance problems in the touched code.",
    system_prompt_addition:
      "Look for measurable performance problems in the code the task touches: repeated work in loops, N+1 queries, unbounded memory, synchronous I/O on hot paths. Fix only what you can justify, and keep behaviour identical.",
  },
];

/** A built-in skill by name, or undefined. */
export function findBuiltinSkill(name: string): SkillDefinition | undefined {
  return BUILTIN_SKILLS.find((s) => s.name === name);
}
