import { useState } from "preact/hooks";
import { api } from "../api.js";
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

type Kind = "slack" | "linear" | "jira";

/** An integration as the API answers it (GET /integrations). */
type Integration = {
  id: string;
  type: Kind;
  name: string;
  enabled: boolean;
  settings: Record<string, unknown>;
  secrets_set: string[];
  endpoints: Record<string, string>;
  install: { team_id: string; team_name: string | null; installed_at: string } | null;
  created_at: string;
  updated_at: string;
};

/** Per vendor: its write-only secrets (which are required) and a starting settings object. */
const KINDS: Record<
  Kind,
  { label: string; secrets: { name: string; label: string; required: boolean }[]; settings: object }
> = {
  slack: {
    label: "Slack",
    secrets: [
      { name: "signing_secret", label: "Signing secret", required: false },
      { name: "bot_token", label: "Bot token (xoxb-…)", required: false },
    ],
    settings: { channels: {}, allowed_users: [], command: "/foreman" },
  },
  linear: {
    label: "Linear",
    secrets: [
      { name: "webhook_secret", label: "Webhook signing secret", required: true },
      { name: "api_key", label: "API key", required: true },
    ],
    settings: { teams: {}, label: "agent" },
  },
  jira: {
    label: "Jira",
    secrets: [
      { name: "webhook_secret", label: "Webhook secret", required: true },
      { name: "api_token", label: "API token", required: true },
    ],
    settings: {
      site_url: "https://example.atlassian.net",
      email: "bot@example.com",
      projects: {},
      label: "agent",
    },
  },
};

/** Parses the settings text; a JSON mistake is said in words, next to the field. */
function parseSettings(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text || "{}") as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch (err) {
    throw new Error(`Settings are not valid JSON: ${(err as Error).message}`);
  }
  throw new Error("Settings must be a JSON object.");
}

function CreateIntegration({ onCreated }: { onCreated: () => void }) {
  const [type, setType] = useState<Kind>("linear");
  const [name, setName] = useState("");
  const [settings, setSettings] = useState(JSON.stringify(KINDS.linear.settings, null, 2));
  const [secrets, setSecrets] = useState<Record<string, string>>({});
  const create = useAction();
  return (
    <form
      class="card"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void create.run(async () => {
          const given = Object.fromEntries(Object.entries(secrets).filter(([, v]) => v));
          await api("POST", "/integrations", {
            type,
            name: name.trim(),
            settings: parseSettings(settings),
            secrets: given,
          });
          setName("");
          setSecrets({});
          onCreated();
        });
      }}
    >
      <h2>New integration</h2>
      <Field id="int-type" label="Vendor">
        <select
          id="int-type"
          value={type}
          onChange={(e) => {
            const t = e.currentTarget.value as Kind;
            setType(t);
            setSettings(JSON.stringify(KINDS[t].settings, null, 2));
            setSecrets({});
          }}
        >
          {(Object.keys(KINDS) as Kind[]).map((k) => (
            <option key={k} value={k}>
              {KINDS[k].label}
            </option>
          ))}
        </select>
      </Field>
      <Field id="int-name" label="Name" error={create.field("name")}>
        <input
          id="int-name"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </Field>
      <Field
        id="int-settings"
        label="Settings (JSON)"
        hint="Map teams, projects or channels to repositories as {workspace_id, repo_id}."
        error={create.field("settings")}
      >
        <textarea
          id="int-settings"
          rows={6}
          class="mono"
          value={settings}
          onInput={(e) => setSettings(e.currentTarget.value)}
        />
      </Field>
      {KINDS[type].secrets.map((s) => (
        <Field
          key={type + s.name}
          id={`int-secret-${s.name}`}
          label={s.label + (s.required ? "" : " (optional)")}
          hint="Write-only: never shown again."
          error={create.field(`secrets.${s.name}`)}
        >
          <input
            id={`int-secret-${s.name}`}
            type="password"
            autoComplete="off"
            value={secrets[s.name] ?? ""}
            onInput={(e) => setSecrets({ ...secrets, [s.name]: e.currentTarget.value })}
          />
        </Field>
      ))}
      <ErrorBox error={create.error} />
      <button type="submit" class="primary" disabled={create.busy}>
        Create integration
      </button>
    </form>
  );
}

function IntegrationItem({ it, onChange }: { it: Integration; onChange: () => void }) {
  const act = useAction();
  const [settings, setSettings] = useState(JSON.stringify(it.settings, null, 2));
  const path = `/integrations/${encodeURIComponent(it.id)}`;
  return (
    <li class="card" data-testid={`integration-${it.name}`}>
      <h3>
        {it.name} <span class="badge">{KINDS[it.type]?.label ?? it.type}</span>{" "}
        <span class={it.enabled ? "badge badge-completed" : "badge badge-cancelled"}>
          {it.enabled ? "enabled" : "disabled"}
        </span>
      </h3>
      <p class="muted">
        Created <Time iso={it.created_at} /> · secrets set:{" "}
        {it.secrets_set.length ? it.secrets_set.join(", ") : "none"}
        {it.install && (
          <> · installed in Slack workspace {it.install.team_name ?? it.install.team_id}</>
        )}
      </p>
      <h4>Endpoints to enter at {KINDS[it.type]?.label ?? it.type}</h4>
      <ul class="plain endpoints">
        {Object.entries(it.endpoints).map(([what, p]) => {
          const url = p.startsWith("http") ? p : location.origin + p;
          return (
            <li key={what}>
              {what.replace(/_/g, " ")}: <code>{url}</code> <CopyButton text={url} />
            </li>
          );
        })}
      </ul>
      <details>
        <summary>Edit settings</summary>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act.run(async () => {
              await api("PATCH", path, { settings: parseSettings(settings) });
              onChange();
            });
          }}
        >
          <Field id={`settings-${it.id}`} label="Settings (JSON)" error={act.field("settings")}>
            <textarea
              id={`settings-${it.id}`}
              rows={6}
              class="mono"
              value={settings}
              onInput={(e) => setSettings(e.currentTarget.value)}
            />
          </Field>
          <button type="submit" disabled={act.busy}>
            Save settings
          </button>
        </form>
      </details>
      <div class="gate-buttons">
        {it.type === "slack" && (
          <button
            type="button"
            disabled={act.busy}
            onClick={() =>
              void act.run(async () => {
                const start = await api<{ authorize_url: string }>("POST", `${path}/slack/install`);
                location.assign(start.authorize_url);
              })
            }
          >
            Install in Slack
          </button>
        )}
        <button
          type="button"
          disabled={act.busy}
          onClick={() =>
            void act.run(async () => {
              await api("PATCH", path, { enabled: !it.enabled });
              onChange();
            })
          }
        >
          {it.enabled ? "Disable" : "Enable"}
        </button>
        <button
          type="button"
          class="danger"
          disabled={act.busy}
          onClick={() => {
            if (window.confirm(`Delete the integration ${it.name}? Its endpoints stop answering.`))
              void act.run(async () => {
                await api("DELETE", path);
                onChange();
              });
          }}
        >
          Delete
        </button>
      </div>
      <ErrorBox error={act.error} />
    </li>
  );
}

/** Integrations: Slack, Linear and Jira connections of the account. */
export function IntegrationsPage() {
  const list = useResource(() => api<Integration[]>("GET", "/integrations"), []);
  return (
    <section>
      <h1>Integrations</h1>
      <div class="grid2">
        <CreateIntegration onCreated={list.reload} />
        <div>
          <h2>Your integrations</h2>
          <Loaded res={list} what="integrations">
            {(items) =>
              items.length === 0 ? (
                <Empty>No integrations yet.</Empty>
              ) : (
                <ul class="cards">
                  {items.map((it) => (
                    <IntegrationItem key={it.id + it.updated_at} it={it} onChange={list.reload} />
                  ))}
                </ul>
              )
            }
          </Loaded>
        </div>
      </div>
    </section>
  );
}
