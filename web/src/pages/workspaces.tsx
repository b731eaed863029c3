import { useState } from "preact/hooks";
import { api, type LinkStart, type Repository, type Workspace } from "../api.js";
import { Empty, ErrorBox, Field, Loaded, Time, useAction, useResource } from "../components.js";

function Repos({ id }: { id: string }) {
  const repos = useResource(
    () => api<Repository[]>("GET", `/workspaces/${encodeURIComponent(id)}/repos`),
    [id],
  );
  return (
    <Loaded res={repos} what="repositories">
      {(list) =>
        list.length === 0 ? (
          <Empty>No repositories.</Empty>
        ) : (
          <ul class="plain">
            {list.map((r) => (
              <li key={r.id}>
                <strong>{r.full_name}</strong> <span class="muted">id {r.id}</span>
                {r.default_branch && <span class="muted"> · branch {r.default_branch}</span>}
                {r.private && <span class="badge">private</span>}
              </li>
            ))}
          </ul>
        )
      }
    </Loaded>
  );
}

/** The question asked before DELETE /workspaces/{id}: what goes and what stays. */
function deleteQuestion(w: Workspace): string {
  const what =
    w.kind === "github"
      ? `Unlink the GitHub installation ${w.name}? The App stays installed on GitHub.`
      : `Delete the workspace ${w.name} and its repositories?`;
  return `${what} Its automations go too; its ended tasks stay. Refused while a task of it has not ended.`;
}

/** One workspace: its repositories, and Delete (after a confirmation). */
function WorkspaceCard({ w, onDeleted }: { w: Workspace; onDeleted: () => void }) {
  const del = useAction();
  return (
    <li class="card" data-testid={`workspace-${w.name}`}>
      <h2>
        {w.name} <span class="badge">{w.kind}</span>
        {w.github?.suspended && <span class="badge badge-failed">suspended</span>}
      </h2>
      <p class="muted">
        id <code>{w.id}</code> · created <Time iso={w.created_at} />
      </p>
      <Repos id={w.id} />
      <ErrorBox error={del.error} />
      <div class="actions">
        <button
          type="button"
          class="danger"
          disabled={del.busy}
          onClick={() => {
            if (window.confirm(deleteQuestion(w)))
              void del.run(async () => {
                await api("DELETE", `/workspaces/${encodeURIComponent(w.id)}`);
                onDeleted();
              });
          }}
        >
          {w.kind === "github" ? "Unlink" : "Delete"}
        </button>
      </div>
    </li>
  );
}

/** The form adding a workspace of one plain-git repository (a clone URL). */
function AddGitWorkspace({ onAdded }: { onAdded: () => void }) {
  const [name, setName] = useState("");
  const [repoName, setRepoName] = useState("");
  const [cloneUrl, setCloneUrl] = useState("");
  const [branch, setBranch] = useState("");
  const add = useAction();
  return (
    <form
      class="card"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run(async () => {
          await api("POST", "/workspaces", {
            name: name.trim(),
            repos: [
              {
                name: repoName.trim(),
                clone_url: cloneUrl.trim(),
                ...(branch.trim() ? { default_branch: branch.trim() } : {}),
              },
            ],
          });
          setName("");
          setRepoName("");
          setCloneUrl("");
          setBranch("");
          onAdded();
        });
      }}
    >
      <h2>Add a plain-git workspace</h2>
      <Field id="ws-name" label="Workspace name" error={add.field("name")}>
        <input
          id="ws-name"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </Field>
      <Field
        id="ws-repo"
        label="Repository name"
        hint="name or owner/name"
        error={add.field("repos.0.name", "repos")}
      >
        <input
          id="ws-repo"
          required
          value={repoName}
          aria-describedby="ws-repo-hint"
          onInput={(e) => setRepoName(e.currentTarget.value)}
        />
      </Field>
      <Field
        id="ws-url"
        label="Clone URL"
        hint="https://, ssh:// or user@host:path"
        error={add.field("repos.0.clone_url")}
      >
        <input
          id="ws-url"
          required
          value={cloneUrl}
          aria-describedby="ws-url-hint"
          onInput={(e) => setCloneUrl(e.currentTarget.value)}
        />
      </Field>
      <Field
        id="ws-branch"
        label="Default branch (optional)"
        hint="the remote's HEAD when empty"
        error={add.field("repos.0.default_branch")}
      >
        <input
          id="ws-branch"
          value={branch}
          aria-describedby="ws-branch-hint"
          onInput={(e) => setBranch(e.currentTarget.value)}
        />
      </Field>
      <ErrorBox error={add.error} />
      <button type="submit" class="primary" disabled={add.busy}>
        Add workspace
      </button>
    </form>
  );
}

/** Workspaces: list with their repositories, add a plain-git one, link a GitHub installation. */
export function WorkspacesPage() {
  const list = useResource(() => api<Workspace[]>("GET", "/workspaces"), []);
  const link = useAction();

  return (
    <section>
      <h1>Workspaces</h1>
      <div class="grid2">
        <AddGitWorkspace onAdded={list.reload} />
        <div class="card">
          <h2>Link a GitHub installation</h2>
          <p>
            Install the GitHub App on your account or organisation; GitHub brings you back here
            linked.
          </p>
          <ErrorBox error={link.error} />
          <button
            type="button"
            disabled={link.busy}
            onClick={() =>
              void link.run(async () => {
                const start = await api<LinkStart>("POST", "/workspaces/link");
                window.open(start.install_url, "_blank", "noopener");
              })
            }
          >
            Link GitHub installation
          </button>
        </div>
      </div>
      <Loaded res={list} what="workspaces">
        {(ws) =>
          ws.length === 0 ? (
            <Empty>No workspaces yet. Add one above.</Empty>
          ) : (
            <ul class="cards">
              {ws.map((w) => (
                <WorkspaceCard key={w.id} w={w} onDeleted={list.reload} />
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}
