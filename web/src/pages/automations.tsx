import { useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { api, type Automation } from "../api.js";
import {
  CopyButton,
  Empty,
  ErrorBox,
  Field,
  Loaded,
  Time,
  useAction,
  useResource,
} from "../components.js";
import { triggerInWords } from "../trigger-words.js";
import { loadStatus, RepoSelect, useRepoNames } from "./tasks.js";

type Trigger = "cron" | "webhook" | "ci_failure";

const TRIGGER_HELP: Record<Trigger, string> = {
  cron: "Creates a task on a schedule. Template values: {{now}}, {{date}}.",
  webhook:
    "Creates a task when POST /automations/webhook receives a payload that matches. Template values: {{payload.some.path}}.",
  ci_failure:
    "Creates a fix task when a check or workflow fails on the repository (GitHub App). Template values: {{check.name}}, {{check.head_branch}}, {{check.summary}}, …",
};

/** The trigger_config of the form's fields; a JSON `match` is parsed here, its errors shown. */
function triggerConfig(type: Trigger, f: Record<string, string>): Record<string, unknown> {
  if (type === "cron")
    return {
      schedule: f.schedule?.trim(),
      ...(f.timezone?.trim() ? { timezone: f.timezone.trim() } : {}),
    };
  if (type === "webhook") {
    let match: unknown = {};
    if (f.match?.trim()) {
      try {
        match = JSON.parse(f.match);
      } catch {
        throw new Error('Match must be a JSON object, for example {"action": "opened"}.');
      }
    }
    return { match, ...(f.secret?.trim() ? { secret: f.secret.trim() } : {}) };
  }
  return {
    ...(f.workflow?.trim() ? { workflow: f.workflow.trim() } : {}),
    ...(f.branch?.trim() ? { branch: f.branch.trim() } : {}),
  };
}

/** The fields of one trigger type's trigger_config: schedule, webhook match, or CI filters. */
function TriggerFields({
  type,
  fields: f,
  onFields: setF,
  error,
}: {
  type: Trigger;
  fields: Record<string, string>;
  onFields: (fields: Record<string, string>) => void;
  /** The API's words about a field of the last request. */
  error: (...paths: string[]) => string | undefined;
}) {
  const input = (name: string, label: string, hint: string, placeholder = "") => (
    <Field id={`auto-${name}`} label={label} hint={hint} error={error(`trigger_config.${name}`)}>
      <input
        id={`auto-${name}`}
        value={f[name] ?? ""}
        placeholder={placeholder}
        aria-describedby={`auto-${name}-hint`}
        onInput={(e) => setF({ ...f, [name]: e.currentTarget.value })}
      />
    </Field>
  );
  return (
    <>
      {type === "cron" && (
        <>
          {input(
            "schedule",
            "Schedule",
            "Five fields: minute hour day-of-month month day-of-week. 0 9 * * 1 is Mondays at 09:00.",
            "0 9 * * 1",
          )}
          {input(
            "timezone",
            "Time zone",
            "IANA name such as Europe/Berlin; UTC when empty.",
            "UTC",
          )}
        </>
      )}
      {type === "webhook" && (
        <>
          <Field
            id="auto-match"
            label="Match (JSON)"
            hint='Dot-path → expected value; an array means any of them; empty matches every payload. Example: {"action": "opened"}'
            error={error("trigger_config.match", "trigger_config")}
          >
            <textarea
              id="auto-match"
              rows={3}
              aria-describedby="auto-match-hint"
              value={f.match ?? ""}
              onInput={(e) => setF({ ...f, match: e.currentTarget.value })}
            />
          </Field>
          {input(
            "secret",
            "Signing secret (optional)",
            "Only payloads signed X-Hub-Signature-256 with this secret match. Never shown again.",
          )}
        </>
      )}
      {type === "ci_failure" && (
        <>
          {input(
            "workflow",
            "Workflow (optional)",
            "Glob on the workflow or check name, e.g. CI or test-*.",
          )}
          {input(
            "branch",
            "Branch (optional)",
            "Glob on the failing branch, e.g. main or release/*.",
          )}
        </>
      )}
    </>
  );
}

/** The form that creates an automation: trigger, repository, its fields, the task template. */
function CreateAutomation({ onCreated }: { onCreated: () => void }) {
  const [type, setType] = useState<Trigger>("cron");
  const [target, setTarget] = useState("");
  const [template, setTemplate] = useState("");
  const [autoApprove, setAutoApprove] = useState(false);
  const [f, setF] = useState<Record<string, string>>({});
  const create = useAction();
  return (
    <form
      class="card"
      onSubmit={(e) => {
        e.preventDefault();
        const [workspace_id, repo_id] = target.split("|");
        void create.run(async () => {
          await api("POST", "/automations", {
            workspace_id,
            repo_id,
            trigger_type: type,
            trigger_config: triggerConfig(type, f),
            task_template: template,
            enabled: true,
            auto_approve: autoApprove,
          });
          setTemplate("");
          setF({});
          onCreated();
        });
      }}
    >
      <h2>New automation</h2>
      <Field id="auto-type" label="Trigger" hint={TRIGGER_HELP[type]}>
        <select
          id="auto-type"
          value={type}
          aria-describedby="auto-type-hint"
          onChange={(e) => setType(e.currentTarget.value as Trigger)}
        >
          <option value="cron">Schedule (cron)</option>
          <option value="webhook">Incoming webhook</option>
          <option value="ci_failure">CI failure</option>
        </select>
      </Field>
      <Field id="auto-repo" label="Repository" error={create.field("repo_id", "workspace_id")}>
        <RepoSelect id="auto-repo" value={target} onChange={setTarget} required />
      </Field>
      <TriggerFields type={type} fields={f} onFields={setF} error={create.field} />
      <Field
        id="auto-template"
        label="Task template"
        hint="The task's description; {{dot.path}} is replaced by trigger data."
        error={create.field("task_template")}
      >
        <textarea
          id="auto-template"
          required
          rows={3}
          aria-describedby="auto-template-hint"
          value={template}
          onInput={(e) => setTemplate(e.currentTarget.value)}
        />
      </Field>
      <div class="check">
        <input
          id="auto-approve"
          type="checkbox"
          checked={autoApprove}
          onChange={(e) => setAutoApprove(e.currentTarget.checked)}
        />
        <label for="auto-approve">Auto-approve the tasks it creates</label>
      </div>
      <ErrorBox error={create.error} />
      <button type="submit" class="primary" disabled={create.busy}>
        Create automation
      </button>
    </form>
  );
}

function AutomationItem({
  a,
  repoName,
  webhookUrl,
  onChange,
}: {
  a: Automation;
  repoName: string;
  webhookUrl: string;
  onChange: () => void;
}) {
  const [editing, setEditing] = useState(false);
  const trigger = triggerInWords(a.trigger_type, a.trigger_config, webhookUrl);
  const [template, setTemplate] = useState(a.task_template);
  const act = useAction();
  const patch = (body: Record<string, unknown>) =>
    act.run(async () => {
      await api("PATCH", `/automations/${encodeURIComponent(a.id)}`, body);
      setEditing(false);
      onChange();
    });
  return (
    <li class="card">
      <h2 data-testid="trigger">
        {trigger.text}
        {trigger.url ? ":" : ""} <span class="muted">on {repoName}</span>{" "}
        {!a.enabled && <span class="badge badge-cancelled">disabled</span>}
      </h2>
      {trigger.url && (
        <p class="webhook-url">
          POST to{" "}
          <code class="wrap" data-testid="webhook-url">
            {trigger.url}
          </code>{" "}
          <CopyButton text={trigger.url} label="Copy URL" />
        </p>
      )}
      {trigger.details.length > 0 && (
        <ul class="muted trigger-details">
          {trigger.details.map((d) => (
            <li key={d}>{d}</li>
          ))}
        </ul>
      )}
      {editing ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void patch({ task_template: template });
          }}
        >
          <Field id={`tpl-${a.id}`} label="Task template">
            <textarea
              id={`tpl-${a.id}`}
              rows={3}
              value={template}
              onInput={(e) => setTemplate(e.currentTarget.value)}
            />
          </Field>
          <button type="submit" class="primary" disabled={act.busy}>
            Save
          </button>{" "}
          <button type="button" onClick={() => setEditing(false)}>
            Cancel
          </button>
        </form>
      ) : (
        <p>{a.task_template}</p>
      )}
      <Firings automation={a} />
      <ErrorBox error={act.error} />
      <div class="actions">
        <button
          type="button"
          disabled={act.busy}
          onClick={() => void patch({ enabled: !a.enabled })}
        >
          {a.enabled ? "Disable" : "Enable"}
        </button>
        {!editing && (
          <button type="button" onClick={() => setEditing(true)}>
            Edit template
          </button>
        )}
        <button
          type="button"
          class="danger"
          disabled={act.busy}
          onClick={() => {
            if (window.confirm("Delete this automation?"))
              void act.run(async () => {
                await api("DELETE", `/automations/${encodeURIComponent(a.id)}`);
                onChange();
              });
          }}
        >
          Delete
        </button>
      </div>
    </li>
  );
}

/** When an automation last fired (and its task), when it fires next, and its last refusal. */
function Firings({ automation: a }: { automation: Automation }) {
  return (
    <>
      <p class="muted">
        Last fired: <Time iso={a.last_triggered_at} />
        {a.last_task_id && (
          <>
            {" "}
            (<Link href={`/tasks/${a.last_task_id}`}>task</Link>)
          </>
        )}
        {a.next_run_at && (
          <>
            {" "}
            · next: <Time iso={a.next_run_at} />
          </>
        )}
      </p>
      {a.last_refusal && (
        <p class="warn">
          Last refusal (<Time iso={a.last_refusal.at} />
          ): {a.last_refusal.reason}
        </p>
      )}
    </>
  );
}

/** Automations: create for each trigger type, edit, enable/disable, delete; last firing. */
export function AutomationsPage() {
  const list = useResource(() => api<Automation[]>("GET", "/automations"), []);
  const repoName = useRepoNames();
  const status = useResource(() => loadStatus(), []);
  // The address payloads are POSTed to: the public URL when the operator set one.
  const base = (status.data?.public_url.value ?? location.origin).replace(/\/$/, "");
  const webhookUrl = `${base}/automations/webhook`;
  return (
    <section>
      <h1>Automations</h1>
      <CreateAutomation onCreated={list.reload} />
      <Loaded res={list} what="automations">
        {(items) =>
          items.length === 0 ? (
            <Empty>No automations yet.</Empty>
          ) : (
            <ul class="cards">
              {items.map((a) => (
                <AutomationItem
                  key={a.id}
                  a={a}
                  repoName={repoName(a.workspace_id, a.repo_id)}
                  webhookUrl={webhookUrl}
                  onChange={list.reload}
                />
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}
