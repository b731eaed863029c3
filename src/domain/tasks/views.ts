import {
  type CheckRecord,
  type RevisionRecord,
  type TaskPhase,
  type TaskRecord,
  type TaskStatus,
} from "../../db/models.js";
import { type MemoryView } from "../agents/memory.js";
import { taskEvidence, type TaskEvidence } from "./evidence.js";
import type { ReviewResult } from "../../tools/review-tool.js";

export interface TaskView {
  id: string;
  description: string;
  status: TaskStatus;
  phase: TaskPhase;
  created_at: string;
  updated_at: string;
  repo_id: string;
  workspace_id: string;
  pr_url: string | null;
  error: string | null;
  auto_approve: boolean;
  skill_name: string | null;
  agent_name: string | null;
  plan: Array<{ step: number; title: string; description: string; files: string[] }> | null;
  plan_summary: string | null;
  plan_targets: string[];
  diff: string | null;
  /** What REVIEWING stored: the model's `submit_review` (pipeline/stages/review.ts). */
  review: ReviewResult | null;
  branch: string | null;
  depends_on: string[];
  cost: {
    input_tokens: number;
    output_tokens: number;
    usd: number;
    cached_input_tokens: number;
    cache_write_tokens: number;
  };
  memories_used: MemoryView[];
  checks: CheckRecord | null;
  /** What verification showed, for people and pull requests (domain/tasks/evidence.ts). */
  evidence: TaskEvidence | null;
  revisions: RevisionView[];
  parent_task_id: string | null;
  /** The commit the task starts from: the requested one until CLONING resolves it. */
  base_sha: string | null;
}

/** One revision as the API shows it (docs/api.md, "Revisions"). */
export interface RevisionView {
  gate: "plan" | "diff";
  feedback: string;
  by: string;
  at: string;
  plan?: NonNullable<TaskView["plan"]>;
  diff?: string;
}

function toRevisionView(revision: RevisionRecord): RevisionView {
  const view: RevisionView = {
    gate: revision.gate,
    feedback: revision.feedback,
    by: revision.by,
    at: new Date(revision.at).toISOString(),
  };
  if (revision.plan)
    view.plan = revision.plan.map((s) => ({
      step: s.step,
      title: s.title,
      description: s.description ?? "",
      files: [...(s.files ?? [])],
    }));
  if (typeof revision.diff === "string") view.diff = revision.diff;
  return view;
}

/** The task as the API shows it. */
export function toTaskView(task: TaskRecord): TaskView {
  return {
    id: task._id,
    description: task.description,
    status: task.status,
    phase: task.phase,
    created_at: task.created_at.toISOString(),
    updated_at: task.updated_at.toISOString(),
    repo_id: task.repo_id,
    workspace_id: task.workspace_id,
    pr_url: task.pr_url ?? null,
    error: task.error ?? null,
    auto_approve: task.auto_approve ?? false,
    skill_name: task.skill_name ?? null,
    agent_name: task.agent_name ?? null,
    plan: task.plan
      ? task.plan.map((s) => ({
          step: s.step,
          title: s.title,
          description: s.description ?? "",
          files: [...(s.files ?? [])],
        }))
      : null,
    plan_summary: task.plan_summary ?? null,
    plan_targets: [...(task.plan_targets ?? [])],
    diff: task.diff ?? null,
    review: task.review ?? null,
    branch: task.branch ?? null,
    depends_on: [...(task.depends_on ?? [])],
    cost: {
      input_tokens: task.cost?.input_tokens ?? 0,
      output_tokens: task.cost?.output_tokens ?? 0,
      usd: Math.round((task.cost?.usd ?? 0) * 1e6) / 1e6,
      cached_input_tokens: task.cost?.cached_input_tokens ?? 0,
      cache_write_tokens: task.cost?.cache_write_tokens ?? 0,
    },
    memories_used: task.memories_used ?? [],
    checks: task.checks ?? null,
    evidence: taskEvidence(task),
    revisions: (task.revisions ?? []).map(toRevisionView),
    parent_task_id: task.parent_task_id ?? null,
    base_sha: task.base_sha ?? task.pinned_sha ?? null,
  };
}
