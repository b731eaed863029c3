import type { Collection, Document } from "mongodb";
import {
  Schema,
  type Connection,
  type InferRawDocTypeFromSchema,
  type InferSchemaType,
} from "mongoose";

/*
 * Storage notes. FerretDB (the embedded server here) answers point lookups on `_id` fast
 * but scans for other fields, and its conditional updates are not atomic. Hot paths
 * therefore look documents up by `_id`, and every "exactly once" decision is a unique
 * `_id` insert, which is atomic on FerretDB and on MongoDB alike.
 */

const timestamps = { createdAt: "created_at", updatedAt: "updated_at" } as const;

export const TIERS = ["free", "pro"] as const;
export type Tier = (typeof TIERS)[number];

const accountSchema = new Schema(
  {
    _id: { type: String, required: true },
    tier: { type: String, enum: TIERS, default: "free", required: true },
    /** Last known quota usage; a hint only, the slots are the truth (domain/accounts/quota.ts). */
    usage: {
      month: { type: String, default: "" },
      hint: { type: Number, default: 0 },
    },
  },
  { timestamps, versionKey: false },
);

const apiKeySchema = new Schema(
  {
    /** sha256 of the key value: the lookup on every request goes by `_id`. */
    _id: { type: String, required: true },
    key_id: { type: String, required: true, unique: true },
    account_id: { type: String, required: true, index: true },
    name: { type: String, required: true },
    /** First characters of the key, to recognise it in listings. */
    prefix: { type: String, required: true },
    revoked_at: { type: Date, default: null },
  },
  { timestamps, versionKey: false },
);

const quotaSlotSchema = new Schema(
  {
    /** `${account}:${YYYY-MM}:${slot}`: the unique insert is the atomic claim. */
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    month: { type: String, required: true },
    slot: { type: Number, required: true },
  },
  { timestamps, versionKey: false },
);

const repositorySchema = new Schema(
  {
    repo_id: { type: String, required: true },
    name: { type: String, required: true },
    full_name: { type: String, required: true },
    clone_url: { type: String, required: true },
    default_branch: { type: String, default: "main" },
    private: { type: Boolean, default: false },
  },
  { _id: false },
);

const workspaceSchema = new Schema(
  {
    _id: { type: String, required: true },
    kind: { type: String, enum: ["git", "github"], required: true },
    /** Null for a GitHub installation that no account has linked yet. */
    account_id: { type: String, default: null, index: true },
    name: { type: String, required: true },
    repos: { type: [repositorySchema], default: [] },
    github: {
      installation_id: { type: Number },
      account_login: { type: String },
      account_type: { type: String },
      target_id: { type: Number },
      suspended_at: { type: Date, default: null },
      deleted_at: { type: Date, default: null },
    },
  },
  { timestamps, versionKey: false },
);

/** Unique markers for work that must happen once: deliveries, job runs, cron slots. */
const onceSchema = new Schema(
  {
    _id: { type: String, required: true },
    scope: { type: String, required: true },
    expires_at: { type: Date, default: null },
  },
  { timestamps, versionKey: false },
);

// The task states live in a module of their own, free of mongoose, so the dashboard can
// import the same lists (web/).
import { TASK_PHASES, TASK_STATUSES, type TaskPhase, type TaskStatus } from "./task-states.js";
export { TASK_PHASES, TASK_STATUSES, type TaskPhase, type TaskStatus };

const planStepSchema = new Schema(
  {
    step: { type: Number, required: true },
    title: { type: String, required: true },
    description: { type: String, default: "" },
    files: { type: [String], default: [] },
  },
  { _id: false },
);

const taskSchema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    workspace_id: { type: String, required: true },
    repo_id: { type: String, required: true },
    /** What the pipeline needs of the repository, read from the workspace when work starts. */
    repo: {
      kind: { type: String, enum: ["git", "github"] },
      full_name: { type: String },
      clone_url: { type: String },
      default_branch: { type: String },
      installation_id: { type: Number, default: null },
    },
    description: { type: String, required: true },
    status: { type: String, enum: TASK_STATUSES, required: true },
    phase: { type: String, enum: TASK_PHASES, required: true },
    auto_approve: { type: Boolean, default: false },
    skill_name: { type: String, default: null },
    agent_name: { type: String, default: null },
    source: { type: String, default: "api" },
    plan: { type: [planStepSchema], default: null },
    plan_summary: { type: String, default: null },
    /** Test ids the plan says the change will make pass (submit_plan `targets`). */
    plan_targets: { type: [String], default: undefined },
    diff: { type: String, default: null },
    review: { type: Schema.Types.Mixed, default: null },
    branch: { type: String, default: null },
    pr_url: { type: String, default: null },
    error: { type: String, default: null },
    depends_on: { type: [String], default: [] },
    cost: {
      input_tokens: { type: Number, default: 0 },
      output_tokens: { type: Number, default: 0 },
      usd: { type: Number, default: 0 },
      /** Parts of input_tokens read from and written to the provider's prompt cache. */
      cached_input_tokens: { type: Number, default: 0 },
      cache_write_tokens: { type: Number, default: 0 },
    },
    /**
     * Wall time its sandboxed commands took, finished ones, in ms ($inc per command), against
     * TASK_COMMAND_TIME_LIMIT_S (sandbox/command-time.ts); absent until the first one.
     */
    command_ms: { type: Number },
    /** The quota slot this task holds (null on tiers without a limit). */
    quota: { month: { type: String }, slot: { type: Number, default: null } },
    /** Highest event sequence number known to be stored; a hint, events are the truth. */
    event_seq: { type: Number, default: 1 },
    index_stats: { type: Schema.Types.Mixed, default: null },
    /** The commit the working copy was cloned at. */
    base_sha: { type: String, default: null },
    /**
     * The commit task creation asked to start from (`base_sha` of POST /tasks, maybe
     * abbreviated); CLONING checks it out and stores the full id in `base_sha`.
     */
    pinned_sha: { type: String, default: null },
    /**
     * The working copy's diff as the last implementing, fixing or rework round left it (not
     * shown): a stage resumed on another worker restores the work from it.
     */
    work_diff: { type: String, default: null },
    /** Repository memories read into this task's prompts (domain/agents/memory.ts views). */
    memories_used: { type: [Schema.Types.Mixed], default: undefined },
    /** What VERIFYING ran: where the checks came from and which passed or failed. */
    checks: { type: Schema.Types.Mixed, default: null },
    /**
     * The last passing verification (not shown): the tree its checks ran on and each
     * command's result; PUBLISH keeps them as the baseline of the commit it pushes when that
     * commit has this tree (verify/baseline.ts).
     */
    verified: { type: Schema.Types.Mixed, default: null },
    /** Fix rounds used so far (kept across a resumed VERIFYING). */
    fix_attempts: { type: Number, default: 0 },
    /** Conventions the agent noted with `remember`, written to memory in CLEANUP. */
    learned: { type: [String], default: undefined },
    /** The agent's own summary of what it implemented (its `finish` calls). */
    implement_summary: { type: String, default: null },
    started_at: { type: Date, default: null },
    finished_at: { type: Date, default: null },
    /** The pull request the task opened: its number and what became of it (pull_request.closed). */
    pr_number: { type: Number, default: null },
    pr_state: { type: String, enum: ["open", "merged", "closed", null], default: null },
    pr_merged_at: { type: Date, default: null },
    pr_closed_at: { type: Date, default: null },
    /**
     * The GitHub issue or pull-request thread the task answers in (comment commands, labels,
     * CI failures): plan, diff summary and pull request link are posted there.
     */
    thread: {
      type: new Schema(
        {
          installation_id: { type: Number, required: true },
          repo_full_name: { type: String, required: true },
          number: { type: Number, required: true },
          is_pull_request: { type: Boolean, default: false },
        },
        { _id: false },
      ),
      default: null,
    },
    /** The branch the task starts from and targets, when not the repository's default. */
    base_branch: { type: String, default: null },
    /** What created the task beyond `source` (automation id, agent, comment author, check). */
    origin: { type: Schema.Types.Mixed, default: null },
    /**
     * The chat or issue-tracker conversation the task reports to (src/integrations): the
     * integration, its type and where in it (Slack channel and thread, Linear/Jira issue).
     */
    report_to: { type: Schema.Types.Mixed, default: null },
    /**
     * The pipeline round (domain/tasks/revisions.ts): 0 for the first pass; each revision,
     * retry and self-review round takes the next, so its stages run again under markers
     * and jobs of their own.
     */
    round: { type: Number, default: 0 },
    /** Feedback given at a gate, oldest first, with the plan or diff its round produced. */
    revisions: { type: [Schema.Types.Mixed], default: undefined },
    /** What a round after the first asks of the agent (feedback, a review, a retry's hint). */
    instruction: { type: Schema.Types.Mixed, default: null },
    /** The task this one follows up (a follow-up works on its branch and pull request). */
    parent_task_id: { type: String, default: null },
    /** For a follow-up: the parent's branch and pull request, updated instead of new ones. */
    follow_up: { type: Schema.Types.Mixed, default: null },
  },
  { timestamps, versionKey: false },
);
taskSchema.index({ account_id: 1, created_at: -1 });
taskSchema.index({ status: 1, created_at: 1 });
taskSchema.index({ account_id: 1, "quota.month": 1 });

/**
 * One task event. `_id` is `${task}:${seq}` with the sequence zero-padded, so storing an
 * event is a unique insert (a sequence number is taken once) and reading the next one is an
 * `_id` lookup. Sequence 1 (the QUEUED phase) is the task document itself.
 */
const taskEventSchema = new Schema(
  {
    _id: { type: String, required: true },
    task_id: { type: String, required: true },
    seq: { type: Number, required: true },
    ts: { type: Date, required: true },
    type: { type: String, required: true },
    payload: { type: Schema.Types.Mixed, default: {} },
  },
  { versionKey: false },
);
taskEventSchema.index({ task_id: 1, seq: 1 });

export const MEMORY_KINDS = ["verification", "convention", "rejection", "feedback"] as const;
export type MemoryKind = (typeof MEMORY_KINDS)[number];

/**
 * What the service learned about one repository of one workspace, each item with the task
 * it came from. `_id` is derived from the repository and the text, so learning the same
 * thing twice is one unique insert that fails, not a duplicate.
 */
const repoMemorySchema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    workspace_id: { type: String, required: true },
    repo_id: { type: String, required: true },
    kind: { type: String, enum: MEMORY_KINDS, required: true },
    text: { type: String, required: true },
    source_task_id: { type: String, required: true },
    created_at: { type: Date, required: true },
  },
  { versionKey: false },
);
repoMemorySchema.index({ workspace_id: 1, repo_id: 1, created_at: -1 });

/**
 * A skill of one account (built-ins live in code, domain/agents/skills.ts). `_id` is
 * `${account_id}:${name}`, so a second skill of one name in one account is a duplicate-key
 * error, atomic on FerretDB too; `id` is the opaque id the API shows. A published skill is
 * a marketplace listing under that same `id`; an installed copy names it in `installed_from`.
 */
const skillSchema = new Schema(
  {
    _id: { type: String, required: true },
    id: { type: String, required: true, unique: true },
    account_id: { type: String, required: true },
    name: { type: String, required: true },
    description: { type: String, required: true },
    system_prompt_addition: { type: String, required: true },
    published: { type: Boolean, default: false },
    published_at: { type: Date, default: null },
    /** Installs of this skill from the marketplace (a statistic, not a constraint). */
    install_count: { type: Number, default: 0 },
    /** The marketplace listing (skill `id`) this skill was installed from, if any. */
    installed_from: { type: String, default: null },
  },
  { timestamps, versionKey: false },
);
skillSchema.index({ account_id: 1, created_at: -1 });
skillSchema.index({ published: 1, published_at: -1 });

export const AUTOMATION_TRIGGERS = ["cron", "webhook", "ci_failure"] as const;
export type AutomationTrigger = (typeof AUTOMATION_TRIGGERS)[number];

/**
 * A rule that creates tasks (docs/api.md, "Automations"; domain/automations/automations.ts).
 * `trigger_config` is stored in a storage-safe form: a webhook's `match` is a list of
 * `{path, json}` pairs, because its keys are dot-paths and its values may hold any JSON (dots
 * and `$` in keys included).
 */
const automationSchema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true, index: true },
    workspace_id: { type: String, required: true },
    repo_id: { type: String, required: true },
    trigger_type: { type: String, enum: AUTOMATION_TRIGGERS, required: true },
    trigger_config: { type: Schema.Types.Mixed, default: {} },
    task_template: { type: String, required: true },
    enabled: { type: Boolean, default: true },
    auto_approve: { type: Boolean, default: false },
    last_triggered_at: { type: Date, default: null },
    last_task_id: { type: String, default: null },
    /** The last firing that created no task: `{at, code, reason}`. */
    last_refusal: { type: Schema.Types.Mixed, default: null },
    /** Cron: slots at or before this instant never fire (set when the schedule is (re)armed). */
    armed_at: { type: Date, default: null },
  },
  { timestamps, versionKey: false },
);
automationSchema.index({ trigger_type: 1, enabled: 1 });
automationSchema.index({ workspace_id: 1, repo_id: 1, trigger_type: 1 });

export const HEALTH_REPORT_STATUSES = ["pending", "running", "completed", "failed"] as const;
export type HealthReportStatus = (typeof HEALTH_REPORT_STATUSES)[number];

/**
 * A health scan of one repository (docs/api.md, "Health reports and analytics";
 * domain/health/reports.ts): queued `pending`, `running` while a worker measures it (with a
 * heartbeat), then `completed` with score, grade and metrics or `failed` with an error. Only
 * ids are stored, never the clone URL.
 */
const healthReportSchema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    workspace_id: { type: String, required: true },
    repo_id: { type: String, required: true },
    status: { type: String, enum: HEALTH_REPORT_STATUSES, required: true },
    commit_sha: { type: String, default: null },
    score: { type: Number, default: null },
    grade: { type: String, default: null },
    metrics: { type: Schema.Types.Mixed, default: null },
    weights: { type: Schema.Types.Mixed, default: null },
    error: { type: String, default: null },
    attempts: { type: Number, default: 0 },
    heartbeat_at: { type: Date, default: null },
    started_at: { type: Date, default: null },
    finished_at: { type: Date, default: null },
  },
  { timestamps, versionKey: false },
);
healthReportSchema.index({ account_id: 1, repo_id: 1, created_at: -1 });
healthReportSchema.index({ status: 1, created_at: 1 });

/** A chat or issue-tracker integration of an account (src/integrations). */
const integrationSchema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true },
    type: { type: String, required: true, enum: ["slack", "linear", "jira"] },
    name: { type: String, required: true },
    enabled: { type: Boolean, default: true },
    settings: { type: Schema.Types.Mixed, default: {} },
    /** Write-only values (signing secrets, tokens): never answered by the API. */
    secrets: { type: Schema.Types.Mixed, default: {} },
    /** Slack: the team the app was installed into through Slack's OAuth flow. */
    install: { type: Schema.Types.Mixed, default: null },
  },
  { timestamps, versionKey: false },
);
integrationSchema.index({ account_id: 1, created_at: -1 });
/**
 * The first answer to a creating POST sent with an `Idempotency-Key` (http/idempotency.ts).
 * `_id` is a hash of the scope (account or client address) and the key: the unique insert is
 * the lock, so of concurrent requests with one key exactly one runs.
 */
const idempotencyRecordSchema = new Schema(
  {
    _id: { type: String, required: true },
    /** sha256 of method, path, query and the canonical JSON body. */
    fingerprint: { type: String, required: true },
    state: { type: String, enum: ["pending", "done"], required: true },
    /** Random per insert: the request that inserted it completes or drops only its own. */
    token: { type: String },
    status: { type: Number, default: null },
    /** The answer's body and headers, AES-GCM sealed with a key derived from the client's key. */
    sealed: { type: String, default: null },
    expires_at: { type: Date, required: true },
  },
  { timestamps, versionKey: false },
);
idempotencyRecordSchema.index({ expires_at: 1 });

/**
 * When a key last authenticated a request, to the minute (domain/accounts/keys.ts). Kept apart from
 * the key: FerretDB's updates rewrite the whole document without atomicity, so a usage
 * write racing a revocation on the key itself could undo the revocation.
 */
const keyUseSchema = new Schema(
  {
    /** The key's `_id` (the hash of its value). */
    _id: { type: String, required: true },
    last_used_at: { type: Date, required: true },
  },
  { versionKey: false },
);

/**
 * One model call of a task (GET /tasks/{id}/trajectory; domain/tasks/trajectories.ts), appended
 * once and never updated. `_id` is `${task}:${time}:${random}` so a task's calls read back in
 * order by `_id` alone.
 */
const trajectoryStepSchema = new Schema(
  {
    _id: { type: String, required: true },
    task_id: { type: String, required: true },
    account_id: { type: String, required: true },
    stage: { type: String, required: true },
    step: { type: Number, required: true },
    at: { type: Date, required: true },
    model: { type: String, required: true },
    messages: { type: Schema.Types.Mixed, default: [] },
    response: { type: Schema.Types.Mixed, default: {} },
    tool_results: { type: Schema.Types.Mixed, default: [] },
    usage: { type: Schema.Types.Mixed, default: {} },
    usd: { type: Number, default: 0 },
    ms: { type: Number, default: 0 },
  },
  { versionKey: false },
);
trajectoryStepSchema.index({ at: 1 });

/**
 * An account's MCP servers for its tasks' agents (domain/agents/mcp-settings.ts), one document per
 * account (`_id` is the account id). `secrets` are write-only: the API answers their names.
 */
const mcpSettingSchema = new Schema(
  {
    _id: { type: String, required: true },
    servers: { type: Schema.Types.Mixed, default: {} },
    secrets: { type: Schema.Types.Mixed, default: {} },
  },
  { timestamps, versionKey: false, minimize: false },
);

export function registerModels(connection: Connection) {
  return {
    Account: connection.model("Account", accountSchema, "accounts"),
    ApiKey: connection.model("ApiKey", apiKeySchema, "api_keys"),
    QuotaSlot: connection.model("QuotaSlot", quotaSlotSchema, "quota_slots"),
    Workspace: connection.model("Workspace", workspaceSchema, "workspaces"),
    Once: connection.model("Once", onceSchema, "once_markers"),
    Task: connection.model("Task", taskSchema, "tasks"),
    TaskEvent: connection.model("TaskEvent", taskEventSchema, "task_events"),
    RepoMemory: connection.model("RepoMemory", repoMemorySchema, "repo_memories"),
    Automation: connection.model("Automation", automationSchema, "automations"),
    Skill: connection.model("Skill", skillSchema, "skills"),
    HealthReport: connection.model("HealthReport", healthReportSchema, "health_reports"),
    Integration: connection.model("Integration", integrationSchema, "integrations"),
    IdempotencyRecord: connection.model(
      "IdempotencyRecord",
      idempotencyRecordSchema,
      "idempotency_records",
    ),
    KeyUse: connection.model("KeyUse", keyUseSchema, "key_uses"),
    TrajectoryStep: connection.model("TrajectoryStep", trajectoryStepSchema, "trajectory_steps"),
    McpSetting: connection.model("McpSetting", mcpSettingSchema, "mcp_settings"),
  };
}

export type Models = ReturnType<typeof registerModels>;

/** A once-marker as stored (durable/once.ts): its unique id, scope and whatever it records. */
export interface OnceRecord {
  _id: string;
  scope: string;
  created_at: Date;
  expires_at?: Date | null;
  [field: string]: unknown;
}

/**
 * A model's driver collection, typed by the record the domain keeps in it (string `_id`s,
 * fields as stored). Hot paths call the driver directly, skipping mongoose's casting and
 * hydration; through this accessor those calls are type-checked instead of cast one by one.
 * The record type is the caller's claim about the stored shape: the one unchecked step.
 */
export function collectionOf<T extends Document>(model: { collection: object }): Collection<T> {
  return model.collection as unknown as Collection<T>;
}
/** A monthly quota slot as stored (domain/accounts/quota.ts). */
export type QuotaSlotRecord = InferRawDocTypeFromSchema<typeof quotaSlotSchema> & {
  created_at: Date;
  updated_at: Date;
};
export type AccountDoc = InferRawDocTypeFromSchema<typeof accountSchema>;
export type ApiKeyDoc = InferRawDocTypeFromSchema<typeof apiKeySchema>;
export type WorkspaceDoc = InferRawDocTypeFromSchema<typeof workspaceSchema>;
export type RepositoryDoc = InferSchemaType<typeof repositorySchema>;
export type TaskDoc = InferRawDocTypeFromSchema<typeof taskSchema>;
/** What VERIFYING ran (the task's `checks`). */
export interface CheckRecord {
  /** Where the checks came from (".github/foreman.yml", "package.json", …); null: none found. */
  source: string | null;
  fix_attempts: number;
  /** The commit the results were compared with (docs/api.md, "Verification baseline"); null: no
   * base results. */
  base_commit?: string | null;
  /** The plan's targets: test ids the change was to make pass. */
  targets?: string[];
  results: Array<{
    name: string;
    command: string;
    ok: boolean;
    duration_ms: number;
    /** The same check on the unchanged code, when it was run there (it failed after). */
    before?: "passed" | "failed" | null;
    /** Failed the same way before the change: no fix round, not a task failure. */
    pre_existing?: boolean;
    /** What the change did test by test (verify/compare.ts); null: not read per test. */
    tests?: TestsRecord | null;
  }>;
}

/** The last passing verification of a task (`verified`): the tree checked and each result. */
export interface VerifiedRecord {
  /** The git tree id of the working copy the checks ran on (untracked files included). */
  tree: string;
  results: KeptCheckResult[];
}

/** One command's results on a commit as kept and compared (verify/baseline.ts, compare.ts). */
export interface KeptCheckResult {
  command: string;
  ok: boolean;
  /** Per test (a failed one with its failure signature); null: not read per test. */
  tests: Array<{ id: string; status: "passed" | "failed" | "skipped"; signature?: string }> | null;
  /** The whole output, normalized and hashed; "" when it passed or was empty. */
  output: string;
}

/** What the change did in one check, test by test (docs/api.md, "Verification baseline"). */
export interface TestsRecord {
  /** The runner read (verify/tests): "node:test", "pytest", … */
  runner?: string;
  total: number;
  passed: number;
  failed: number;
  skipped: number;
  new_failures: string[];
  fixed: string[];
  still_failing: string[];
  added: string[];
  /** Tests the change adds or edits that failed on the base and pass now. */
  reproduced: string[];
  /** The full counts of the lists above (written always; absent on records of other writers). */
  new_failures_count?: number;
  fixed_count?: number;
  still_failing_count?: number;
  added_count?: number;
  reproduced_count?: number;
}

/** One repository memory as tasks show it (`memories_used`). */
export interface MemoryView {
  id: string;
  kind: MemoryKind;
  text: string;
  source_task_id: string;
  created_at: string;
}

/** Feedback given at a gate (`revisions`), with what its round produced there. */
export interface RevisionRecord {
  gate: "plan" | "diff";
  feedback: string;
  by: string;
  at: Date;
  /** The round the revision started. */
  round: number;
  plan?: PlanStep[] | null;
  diff?: string | null;
}

/** What a round after the first asks of the agent (`instruction`). */
export interface InstructionRecord {
  round: number;
  kind: "feedback" | "review" | "retry";
  text: string;
  by: string;
}

/** A follow-up's parent work (`follow_up`): pushed to this branch, shown on this pull request. */
export interface FollowUpRecord {
  branch: string;
  pr_url: string | null;
  pr_number: number | null;
}

export type TaskRecord = Omit<
  TaskDoc,
  | "repo"
  | "plan"
  | "checks"
  | "memories_used"
  | "revisions"
  | "instruction"
  | "follow_up"
  | "verified"
> & {
  /** Stored as plain objects (the driver reads them): not mongoose's document array. */
  plan?: PlanStep[] | null;
  checks?: CheckRecord | null;
  verified?: VerifiedRecord | null;
  revisions?: RevisionRecord[] | null;
  instruction?: InstructionRecord | null;
  follow_up?: FollowUpRecord | null;
  memories_used?: MemoryView[] | null;
  _id: string;
  repo: {
    kind: "git" | "github";
    full_name: string;
    clone_url: string;
    default_branch: string;
    installation_id: number | null;
  };
  status: TaskStatus;
  phase: TaskPhase;
  created_at: Date;
  updated_at: Date;
};
export type PlanStep = InferSchemaType<typeof planStepSchema>;
export type RepoMemoryDoc = InferRawDocTypeFromSchema<typeof repoMemorySchema>;
export type SkillDoc = InferRawDocTypeFromSchema<typeof skillSchema>;
