import type { PlanStep } from "../../db/models.js";

/**
 * A plan as a Markdown list: the step, its title, its files, then its description, on an
 * indented line of its own (`block`, as in the pull request) or after a dash.
 */
export function planMarkdown(
  plan: PlanStep[] | null | undefined,
  layout: "block" | "inline",
): string {
  return (plan ?? [])
    .map((s) => {
      const files = s.files.length ? ` (${s.files.map((f) => `\`${f}\``).join(", ")})` : "";
      const description = !s.description
        ? ""
        : layout === "block"
          ? `\n   ${s.description.replace(/\n/g, "\n   ")}`
          : ` — ${s.description}`;
      return `${s.step}. **${s.title}**${files}${description}`;
    })
    .join("\n");
}
