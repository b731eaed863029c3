import { useState } from "preact/hooks";
import type { z } from "zod";
import type { mcpSettings } from "../../../src/http/routes/mcp-servers/schema.js";
import { api } from "../api.js";
import { Empty, ErrorBox, Field, Loaded, Time, useAction, useResource } from "../components.js";

type McpSettings = z.infer<typeof mcpSettings>;
type Server = McpSettings["servers"][string];

/** The secret names a server uses: a command's environment, or a URL's headers. */
function secretsOf(server: Server): string[] {
  if ("command" in server) return server.env_secrets ?? [];
  return Object.values(server.header_secrets ?? {});
}

const lines = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);

type Draft = {
  name: string;
  kind: "command" | "url";
  command: string;
  args: string;
  url: string;
  /** command: one secret name a line; url: `Header: SECRET` a line. */
  secrets: string;
};

const EMPTY: Draft = { name: "", kind: "command", command: "", args: "", url: "", secrets: "" };

function draftOf(name: string, server: Server): Draft {
  if ("command" in server)
    return {
      ...EMPTY,
      name,
      kind: "command",
      command: server.command,
      args: (server.args ?? []).join("\n"),
      secrets: (server.env_secrets ?? []).join("\n"),
    };
  return {
    ...EMPTY,
    name,
    kind: "url",
    url: server.url,
    secrets: Object.entries(server.header_secrets ?? {})
      .map(([h, s]) => `${h}: ${s}`)
      .join("\n"),
  };
}

/** The server entry of a draft, in the API's shape (src/tools/mcp-tools.ts). */
function serverOf(d: Draft): Server {
  if (d.kind === "command") {
    const args = lines(d.args);
    const env = lines(d.secrets);
    return {
      command: d.command.trim(),
      ...(args.length ? { args } : {}),
      ...(env.length ? { env_secrets: env } : {}),
    };
  }
  const headers: Record<string, string> = {};
  for (const line of lines(d.secrets)) {
    const at = line.indexOf(":");
    if (at < 1) throw new Error(`"${line}" is not "Header: SECRET_NAME".`);
    headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return {
    url: d.url.trim(),
    ...(Object.keys(headers).length ? { header_secrets: headers } : {}),
  };
}

/** How a server is reached: a command with its arguments, or a URL; and its secrets. */
function ConnectionFields({
  draft: d,
  set,
  id,
}: {
  draft: Draft;
  set: (patch: Partial<Draft>) => void;
  id: (field: string) => string;
}) {
  return d.kind === "command" ? (
    <>
      <Field id={id("command")} label="Command">
        <input
          id={id("command")}
          required
          value={d.command}
          placeholder="npx"
          onInput={(e) => set({ command: e.currentTarget.value })}
        />
      </Field>
      <Field id={id("args")} label="Arguments" hint="One a line.">
        <textarea
          id={id("args")}
          rows={2}
          value={d.args}
          onInput={(e) => set({ args: e.currentTarget.value })}
        />
      </Field>
      <Field
        id={id("secrets")}
        label="Secrets as environment variables"
        hint="One secret name a line, e.g. TRACKER_TOKEN; set its value below."
      >
        <textarea
          id={id("secrets")}
          rows={2}
          value={d.secrets}
          onInput={(e) => set({ secrets: e.currentTarget.value })}
        />
      </Field>
    </>
  ) : (
    <>
      <Field id={id("url")} label="URL" hint="Must be allowed by the operator (MCP_ALLOWED_URLS).">
        <input
          id={id("url")}
          type="url"
          required
          value={d.url}
          onInput={(e) => set({ url: e.currentTarget.value })}
        />
      </Field>
      <Field
        id={id("secrets")}
        label="Secrets as headers"
        hint="Header: SECRET_NAME, one a line, e.g. Authorization: DOCS_TOKEN; set its value below."
      >
        <textarea
          id={id("secrets")}
          rows={2}
          value={d.secrets}
          onInput={(e) => set({ secrets: e.currentTarget.value })}
        />
      </Field>
    </>
  );
}

/** Add or edit one server; `original` is the name being edited (renaming replaces it). */
function ServerForm({
  settings,
  original,
  onSaved,
  onCancel,
}: {
  settings: McpSettings;
  original?: string;
  onSaved: (s: McpSettings) => void;
  onCancel?: () => void;
}) {
  const [d, setD] = useState<Draft>(
    original && settings.servers[original] ? draftOf(original, settings.servers[original]) : EMPTY,
  );
  const save = useAction();
  const id = (f: string) => `mcp-${original ?? "new"}-${f}`;
  const set = (patch: Partial<Draft>) => setD({ ...d, ...patch });
  return (
    <form
      class="card"
      data-testid={original ? `edit-${original}` : "add-server"}
      onSubmit={(e) => {
        e.preventDefault();
        void save.run(async () => {
          const servers = { ...settings.servers };
          if (original) delete servers[original];
          servers[d.name.trim()] = serverOf(d);
          const next = await api<McpSettings>("PATCH", "/settings/mcp-servers", { servers });
          if (!original) setD(EMPTY);
          onSaved(next);
        });
      }}
    >
      <h2>{original ? `Edit ${original}` : "Add an MCP server"}</h2>
      <Field
        id={id("name")}
        label="Name"
        hint="Letters, digits, - and _; its tools reach the model as mcp__<name>__<tool>."
      >
        <input
          id={id("name")}
          required
          value={d.name}
          onInput={(e) => set({ name: e.currentTarget.value })}
        />
      </Field>
      <Field id={id("kind")} label="Runs as">
        <select
          id={id("kind")}
          value={d.kind}
          onChange={(e) => set({ kind: e.currentTarget.value as Draft["kind"] })}
        >
          <option value="command">A command in the task's sandbox (stdio)</option>
          <option value="url">An HTTP endpoint (Streamable HTTP)</option>
        </select>
      </Field>
      <ConnectionFields draft={d} set={set} id={id} />
      <ErrorBox error={save.error} />
      <button type="submit" class="primary" disabled={save.busy}>
        {original ? "Save server" : "Add server"}
      </button>
      {onCancel && (
        <>
          {" "}
          <button type="button" onClick={onCancel}>
            Cancel
          </button>
        </>
      )}
    </form>
  );
}

/** One secret: set or not (never its value), set a new value, remove it. */
function SecretRow({
  name,
  isSet,
  onSaved,
}: {
  name: string;
  isSet: boolean;
  onSaved: (s: McpSettings) => void;
}) {
  const [value, setValue] = useState("");
  const act = useAction();
  const send = (v: string | null) =>
    act.run(async () => {
      onSaved(await api<McpSettings>("PATCH", "/settings/mcp-servers", { secrets: { [name]: v } }));
      setValue("");
    });
  return (
    <li data-testid={`secret-${name}`}>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          if (value) void send(value);
        }}
      >
        <code>{name}</code>{" "}
        <span class={isSet ? "badge badge-completed" : "badge badge-cancelled"}>
          {isSet ? "set" : "not set"}
        </span>{" "}
        <label for={`secret-value-${name}`} class="sr-only">
          New value of {name}
        </label>
        <input
          id={`secret-value-${name}`}
          type="password"
          autocomplete="off"
          placeholder={isSet ? "New value" : "Value"}
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />{" "}
        <button type="submit" disabled={act.busy || !value}>
          {isSet ? "Replace" : "Set"}
        </button>
        {isSet && (
          <>
            {" "}
            <button
              type="button"
              class="danger"
              disabled={act.busy}
              onClick={() => {
                if (window.confirm(`Remove the secret ${name}?`)) void send(null);
              }}
            >
              Remove
            </button>
          </>
        )}
      </form>
      <ErrorBox error={act.error} />
    </li>
  );
}

function ServerItem({
  name,
  server,
  settings,
  onSaved,
}: {
  name: string;
  server: Server;
  settings: McpSettings;
  onSaved: (s: McpSettings) => void;
}) {
  const [editing, setEditing] = useState(false);
  const del = useAction();
  if (editing)
    return (
      <li>
        <ServerForm
          settings={settings}
          original={name}
          onSaved={(s) => {
            setEditing(false);
            onSaved(s);
          }}
          onCancel={() => setEditing(false)}
        />
      </li>
    );
  const secrets = secretsOf(server);
  return (
    <li class="card" data-testid={`server-${name}`}>
      <h2>{name}</h2>
      <p>
        {"command" in server ? (
          <>
            Runs <code class="wrap">{[server.command, ...(server.args ?? [])].join(" ")}</code> in
            the task's sandbox
          </>
        ) : (
          <>
            Calls <code class="wrap">{server.url}</code>
          </>
        )}
      </p>
      {secrets.length > 0 && (
        <p>
          Secrets:{" "}
          {secrets.map((s, i) => (
            <span key={s}>
              {i > 0 && ", "}
              <code>{s}</code> ({settings.secrets.includes(s) ? "set" : "not set"})
            </span>
          ))}
        </p>
      )}
      <ErrorBox error={del.error} />
      <div class="actions">
        <button type="button" onClick={() => setEditing(true)}>
          Edit
        </button>
        <button
          type="button"
          class="danger"
          disabled={del.busy}
          onClick={() => {
            if (!window.confirm(`Delete the MCP server ${name}?`)) return;
            void del.run(async () => {
              const servers = { ...settings.servers };
              delete servers[name];
              onSaved(await api<McpSettings>("PATCH", "/settings/mcp-servers", { servers }));
            });
          }}
        >
          Delete
        </button>
      </div>
    </li>
  );
}

/**
 * Settings: the account's MCP servers for its tasks' agents (GET/PATCH
 * /settings/mcp-servers): add, edit, delete; their secrets shown as set or not, never read.
 */
export function SettingsPage() {
  const res = useResource(() => api<McpSettings>("GET", "/settings/mcp-servers"), []);
  const [saved, setSaved] = useState<McpSettings | undefined>();
  const settings = saved ?? res.data;
  return (
    <section>
      <h1>Settings</h1>
      <p class="muted">
        MCP servers every task of this account offers its agent, besides a repository's own{" "}
        <code>.github/foreman.yml</code> <code>mcp_servers:</code> (which wins on a shared name).
      </p>
      <Loaded res={{ ...res, data: settings }} what="the MCP servers">
        {(s) => {
          const names = Object.keys(s.servers).sort();
          const secretNames = [
            ...new Set([...Object.values(s.servers).flatMap(secretsOf), ...s.secrets]),
          ].sort();
          return (
            <>
              <h2>MCP servers</h2>
              {names.length === 0 ? (
                <Empty>No MCP servers yet.</Empty>
              ) : (
                <ul class="cards" data-testid="mcp-servers">
                  {names.map((n) => (
                    <ServerItem
                      key={n}
                      name={n}
                      server={s.servers[n]!}
                      settings={s}
                      onSaved={setSaved}
                    />
                  ))}
                </ul>
              )}
              <ServerForm settings={s} onSaved={setSaved} />
              <div class="card">
                <h2>Secrets</h2>
                <p class="muted">
                  Values are write-only: they are never shown again, logged or given to a model.
                  {s.updated_at && (
                    <>
                      {" "}
                      Last changed <Time iso={s.updated_at} />.
                    </>
                  )}
                </p>
                {secretNames.length === 0 ? (
                  <Empty>No server names a secret.</Empty>
                ) : (
                  <ul class="plain" data-testid="mcp-secrets">
                    {secretNames.map((n) => (
                      <SecretRow
                        key={n}
                        name={n}
                        isSet={s.secrets.includes(n)}
                        onSaved={setSaved}
                      />
                    ))}
                  </ul>
                )}
              </div>
            </>
          );
        }}
      </Loaded>
    </section>
  );
}
