import {
  collectionOf,
  type MemoryKind,
  type MemoryView,
  type Models,
  type RepoMemoryDoc,
} from "../../db/models.js";
import { isDuplicateKey } from "../../util/duplicate-key.js";
import { sha256 } from "../../util/ids.js";
import { redactText } from "../../util/redact.js";

/*
 * Repository memory (issue #4): what earlier tasks on a repository learned — verification
 * commands that worked, conventions the agent noted, why a plan or diff was rejected. It is
 * read into later plans and shown on each task as `memories_used`.
 */

/** How many memories one task reads into its prompts, newest first. */
const MEMORIES_PER_TASK = 20;
const MAX_MEMORY_CHARS = 1000;

export type { MemoryView };

export interface MemoryScope {
  account_id: string;
  workspace_id: string;
  repo_id: string;
}

/** The repository a task works on, as memory is kept: per account, workspace and repository. */
export function memoryScopeOf(task: MemoryScope): MemoryScope {
  return { account_id: task.account_id, workspace_id: task.workspace_id, repo_id: task.repo_id };
}

/** A memory as stored: its `_id` is a hash of its scope, kind and text (memoryId). */
type MemoryRecord = Omit<RepoMemoryDoc, "_id"> & { _id: string };

/** The driver collection this module reads and writes, typed by its records. */
const memoriesOf = (models: Models) => collectionOf<MemoryRecord>(models.RepoMemory);

function toMemoryView(doc: MemoryRecord): MemoryView {
  return {
    id: doc._id,
    kind: doc.kind as MemoryKind,
    text: doc.text,
    source_task_id: doc.source_task_id,
    created_at: new Date(doc.created_at).toISOString(),
  };
}

function memoryId(scope: MemoryScope, kind: MemoryKind, text: string): string {
  const key = [scope.account_id, scope.workspace_id, scope.repo_id, kind, text.toLowerCase()];
  return `mem_${sha256(key.join("\u0000")).slice(0, 32)}`;
}

/**
 * Stores what a task learned. Text is redacted and capped; something already known about
 * the repository is kept once, with the task that first taught it. Returns how many were new.
 */
export async function remember(
  models: Models,
  scope: MemoryScope,
  sourceTaskId: string,
  items: Array<{ kind: MemoryKind; text: string }>,
): Promise<number> {
  let added = 0;
  for (const item of items) {
    const text = redactText(item.text.trim()).slice(0, MAX_MEMORY_CHARS);
    if (!text) continue;
    try {
      await memoriesOf(models).insertOne({
        _id: memoryId(scope, item.kind, text),
        ...scope,
        kind: item.kind,
        text,
        source_task_id: sourceTaskId,
        created_at: new Date(),
      });
      added += 1;
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
  }
  return added;
}

/** The repository's memories, newest first (at most `limit`). */
export async function recall(
  models: Models,
  scope: MemoryScope,
  limit = MEMORIES_PER_TASK,
): Promise<MemoryView[]> {
  const docs = await memoriesOf(models)
    .find({
      account_id: scope.account_id,
      workspace_id: scope.workspace_id,
      repo_id: scope.repo_id,
    })
    .sort({ created_at: -1, _id: -1 })
    .limit(limit)
    .toArray();
  return docs.map(toMemoryView);
}

const KIND_WORDS: Record<MemoryKind, string> = {
  verification: "Verification",
  convention: "Convention",
  rejection: "Rejected before",
  feedback: "Reviewer feedback",
};

/**
 * Records what a person's feedback taught about the repository (a revision's feedback, a
 * rejection's reason), so later tasks on it read it with the other lessons.
 */
export async function rememberFeedback(
  models: Models,
  task: MemoryScope & { _id: string; description: string },
  feedback: { kind: "feedback" | "rejection"; what: "plan" | "diff"; text: string },
): Promise<void> {
  const asked = task.description.trim().split("\n")[0]!.slice(0, 200);
  const text =
    feedback.kind === "rejection"
      ? `A ${feedback.what} was rejected for the task "${asked}" because: ${feedback.text}`
      : `Feedback on a ${feedback.what} for the task "${asked}": ${feedback.text}`;
  await remember(models, memoryScopeOf(task), task._id, [{ kind: feedback.kind, text }]);
}

/** The memories as a prompt block (empty when there are none). */
export function memoryPromptBlock(memories: MemoryView[]): string {
  if (memories.length === 0) return "";
  const lines = memories.map(
    (m) =>
      `- ${KIND_WORDS[m.kind]} (task ${m.source_task_id}, ${m.created_at.slice(0, 10)}): ${m.text}`,
  );
  return `What earlier tasks learned about this repository (newest first; trust the code when they disagree):\n${lines.join("\n")}`;
}
