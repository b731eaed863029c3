/*
 * The title and body of the change request a task opens: a GitHub pull request today, a
 * GitLab merge request or a Gitea pull request later. All three render the same Markdown;
 * only the size limit differs (`maxChars`: GitHub's body takes 65,536 characters).
 */
import type { PlanStep, TaskRecord } from "../../db/models.js";
import type { ReviewResult } from "../../tools/review-tool.js";
import { redactText } from "../../util/redact.js";
import { planMarkdown } from "./plan-text.js";
import { taskEvidence, type IdList, type TaskEvidence } from "../tasks/evidence.js";

/** GitHub's limit on a pull request's body, in characters. */
export const GITHUB_BODY_LIMIT = 65_536;
/** Test ids shown per list in a body; the rest are counted. */
const IDS_PER_LIST = 20;
/** A test id's longest shown form (parametrized ids can be long). */
const ID_CHARS = 200;
/** Checks listed one by one; a repository with more has the rest counted. */
const COMMANDS_SHOWN = 20;
/** Parts a person wrote or a model produced, capped so the evidence always fits. */
const TASK_CHARS = 4_000;
const PLAN_CHARS = 10_000;
const REVIEW_CHARS = 8_000;

/** The first line of a commit or change request: the plan's summary, else the task's words. */
export function changeTitle(task: Pick<TaskRecord, "description" | "plan_summary">): string {
  const source = (task.plan_summary || task.description).trim().split("\n")[0] ?? "";
  const sentence = source.split(/(?<=\.)\s/)[0] ?? source;
  const title = sentence.replace(/\.$/, "");
  return cap(title, 72);
}

/** `text` within `chars` characters: cut, trailing space dropped, and an ellipsis added. */
function cap(text: string, chars: number): string {
  return text.length <= chars ? text : `${text.slice(0, chars - 1).trimEnd()}…`;
}

/** Text as a Markdown code span whatever backticks it holds (test ids may have some). */
function code(text: string): string {
  const flat = cap(text.replace(/\s+/g, " ").trim(), ID_CHARS);
  const longest = Math.max(0, ...(flat.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  return longest ? `${fence} ${flat} ${fence}` : `${fence}${flat}${fence}`;
}

function seconds(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** A titled list of test ids: the first IDS_PER_LIST, then how many more. */
function idSection(title: string, list: IdList, mark?: (id: string) => string): string {
  if (list.count === 0) return "";
  const shown = list.ids.slice(0, IDS_PER_LIST);
  const more = list.count - shown.length;
  const lines = shown.map((id) => `- ${code(id)}${mark?.(id) ?? ""}`);
  if (more > 0) lines.push(`- … and ${more} more`);
  return `**${title}** (${list.count})\n\n${lines.join("\n")}`;
}

function commandLines(evidence: TaskEvidence): string {
  if (evidence.commands.length === 0) return "No checks were found in the repository.";
  const lines = evidence.commands.slice(0, COMMANDS_SHOWN).map((c) => {
    const mark = c.ok ? "✅" : c.pre_existing ? "⚠️" : "❌";
    const note = !c.ok && c.pre_existing ? " — failed the same way on the base commit" : "";
    return `- ${mark} ${cap(c.name, 100)}: ${code(c.command)} (${seconds(c.duration_ms)})${note}`;
  });
  const more = evidence.commands.length - COMMANDS_SHOWN;
  if (more > 0) lines.push(`- … and ${more} more`);
  return lines.join("\n");
}

function testLine(evidence: TaskEvidence): string {
  const t = evidence.tests;
  if (!t) return "";
  const skipped = t.skipped ? `, ${t.skipped} skipped` : "";
  return `Tests: ${t.passed} passed, ${t.failed} failed${skipped} (${t.total} in all).`;
}

/**
 * The evidence as Markdown (docs/api.md, "Evidence"): commands run, tests fixed (red → green),
 * added and reproduced, still failing as on the base, new failures, fix rounds, cost and time.
 */
export function evidenceMarkdown(evidence: TaskEvidence): string {
  const reproduced = new Set(evidence.reproduced.ids);
  const footer = [
    `Fix rounds: ${evidence.fix_rounds}`,
    `model cost: $${evidence.cost.usd.toFixed(4)} (${evidence.cost.input_tokens} input, ${evidence.cost.output_tokens} output tokens)`,
    evidence.duration_ms === null ? "" : `time: ${seconds(evidence.duration_ms)}`,
  ].filter(Boolean);
  const base = evidence.base_commit
    ? `Compared with the base commit ${code(evidence.base_commit.slice(0, 12))}.`
    : "";
  const parts = [
    `**Commands run**\n\n${commandLines(evidence)}`,
    base,
    testLine(evidence),
    idSection("Fixed: red on the base commit, green now", evidence.fixed),
    idSection("Tests added or edited", evidence.added, (id) =>
      reproduced.has(id) ? " — reproduced: red on the base commit, green now" : "",
    ),
    evidence.reproduced.count > 0
      ? `Reproduced: ${evidence.reproduced.count} of ${evidence.added.count} added or edited tests fail on the base commit and pass now.`
      : "",
    idSection("Still failing, as on the base commit (not this change's)", evidence.still_failing),
    idSection("New failures", evidence.new_failures),
    `${footer.join(" · ")}.`,
  ];
  return parts.filter(Boolean).join("\n\n");
}

function reviewMarkdown(review: ReviewResult | null): string {
  if (!review) return "";
  const comments = review.comments.length
    ? `\n\n${review.comments.map((c) => `- \`${c.path}:${c.line}\` (${c.severity}): ${c.body}`).join("\n")}`
    : "";
  return `## Review\n\n**Verdict:** ${review.verdict.replace("_", " ")}\n\n${cap(
    review.summary + comments,
    REVIEW_CHARS,
  )}`;
}

/**
 * The change request's body: the task, the evidence of verification, the plan and the
 * review, redacted, within `maxChars` (the parts people or models wrote are capped first, so
 * the evidence always fits).
 */
export function changeRequestBody(
  task: TaskRecord,
  options: { now?: Date; maxChars?: number } = {},
): string {
  const maxChars = options.maxChars ?? GITHUB_BODY_LIMIT;
  const plan = planMarkdown(task.plan as PlanStep[] | null, "block");
  const evidence = taskEvidence(task, options.now);
  const parts = [
    cap(task.plan_summary ?? "", TASK_CHARS),
    `## Task\n\n${cap(task.description, TASK_CHARS)}`,
    `## Verification\n\n${evidence ? evidenceMarkdown(evidence) : "No checks were run."}`,
    `## Plan\n\n${cap(plan, PLAN_CHARS) || "(no plan)"}`,
    reviewMarkdown(task.review as ReviewResult | null),
    task.thread && !task.thread.is_pull_request ? `Closes #${task.thread.number}.` : "",
    `---\nOpened by foreman for task \`${task._id}\`.`,
  ];
  return cap(redactText(parts.filter(Boolean).join("\n\n")), maxChars);
}
