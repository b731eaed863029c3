import { Schema, type Connection, type InferSchemaType } from "mongoose";

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
    /** Last known quota usage; a hint only, the slots are the truth (domain/quota.ts). */
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

export function registerModels(connection: Connection) {
  return {
    Account: connection.model("Account", accountSchema, "accounts"),
    ApiKey: connection.model("ApiKey", apiKeySchema, "api_keys"),
    QuotaSlot: connection.model("QuotaSlot", quotaSlotSchema, "quota_slots"),
    Workspace: connection.model("Workspace", workspaceSchema, "workspaces"),
    Once: connection.model("Once", onceSchema, "once_markers"),
  };
}

export type Models = ReturnType<typeof registerModels>;
export type AccountDoc = InferSchemaType<typeof accountSchema>;
export type ApiKeyDoc = InferSchemaType<typeof apiKeySchema>;
export type WorkspaceDoc = InferSchemaType<typeof workspaceSchema>;
export type RepositoryDoc = InferSchemaType<typeof repositorySchema>;
