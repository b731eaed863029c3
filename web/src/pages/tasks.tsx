import { useEffect, useState } from "preact/hooks";
import { TASK_STATUSES } from "../../../src/db/task-states.js";
import { Link, useLocation, useSearch } from "wouter-preact";
import {
  api,
  query,
  type AgentSummary,
  type Repository,
  type SkillSummary,
  type Task,
  type Workspace,
} from "../api.js";
import {
  Empty,
  ErrorBox,
  Field,
  Loaded,
  StatusBadge,
  Time,
  useAction,
  useResource,
} from "../components.js";

const STATUSES = TASK_STATUSES;
const PAGE = 25;

/** Every repository of the account's workspaces, for pickers. */
export function useRepositories() {
  return useResource(async () => {
    const ws = await api<Workspace[]>("GET", "/workspaces");
    const all = await Promise.all(
      ws.map(async (w) =>
        (await api<Repository[]>("GET", `/workspaces/${encodeURIComponent(w.id)}/repos`)).map(
          (r) => ({
            workspace: w,
            repo: r,
          }),
        ),
      ),
    );
    return all.flat();
  }, []);
}

/** A repository picker whose value is `workspace_id|repo_id`. */
export function RepoSelect({
  id,
  value,
  onChange,
  required,
  allowAll,
}: {
  id: string;
  value: string;
  onChange: (v: string) => void;
  required?: boolean;
  allowAll?: boolean;
}) {
  const repos = useRepositories();
  return (
    <select
      id={id}
      required={required}
      value={value}
      onChange={(e) => onChange(e.currentTarget.value)}
    >
      <option value="">
        {allowAll ? "All repositories" : repos.loading ? "Loading…" : "Choose a repository"}
      </option>
      {(repos.data ?? []).map(({ workspace, repo }) => (
        <option key={workspace.id + repo.id} value={`${workspace.id}|${repo.id}`}>
          {repo.full_name} ({workspace.name})
        </option>
      ))}
    </select>
  );
}

function CreateTask({ onCreated }: { onCreated: (t: Task) => void }) {
  const [target, setTarget] = useState("");
  const [description, setDescription] = useState("");
  const [agent, setAgent] = useState("");
  const [skill, setSkill] = useState("");
  const [autoApprove, setAutoApprove] = useState(false);
  const agents = useResource(() => api<AgentSummary[]>("GET", "/agents"), []);
  const skills = useResource(() => api<SkillSummary[]>("GET", "/skills"), []);
  const create = useAction();
  return (
    <form
      class="card"
      onSubmit={(e) => {
        e.preventDefault();
        const [workspace_id, repo_id] = target.split("|");
        void create.run(async () => {
          const t = await api<Task>("POST", "/tasks", {
            workspace_id,
            repo_id,
            description: description.trim(),
            auto_approve: autoApprove,
            ...(agent ? { agent_name: agent } : {}),
            ...(skill ? { skill_name: skill } : {}),
          });
          onCreated(t);
        });
      }}
    >
      <h2>New task</h2>
      <Field id="task-repo" label="Repository">
        <RepoSelect id="task-repo" value={target} onChange={setTarget} required />
      </Field>
      <Field id="task-description" label="What should change?">
        <textarea
          id="task-description"
          required
          rows={4}
          maxLength={20000}
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
        />
      </Field>
      <div class="grid2">
        <Field id="task-agent" label="Agent (optional)">
          <select id="task-agent" value={agent} onChange={(e) => setAgent(e.currentTarget.value)}>
            <option value="">None</option>
            {(agents.data ?? []).map((a) => (
              <option key={a.name} value={a.name}>
                {a.name} ({a.category})
              </option>
            ))}
          </select>
        </Field>
        <Field id="task-skill" label="Skill (optional)">
          <select id="task-skill" value={skill} onChange={(e) => setSkill(e.currentTarget.value)}>
            <option value="">None</option>
            {(skills.data ?? []).map((s) => (
              <option key={s.name} value={s.name}>
                {s.name}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <div class="check">
        <input
          id="task-auto"
          type="checkbox"
          checked={autoApprove}
          onChange={(e) => setAutoApprove(e.currentTarget.checked)}
        />
        <label for="task-auto">Auto-approve (skip both approval gates)</label>
      </div>
      <ErrorBox error={create.error} />
      <button type="submit" class="primary" disabled={create.busy}>
        Create task
      </button>
    </form>
  );
}

/** Tasks newest first, filtered by repository and status, paged; and the create form. */
export function TasksPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const [ws, setWs] = useState(search.get("workspace") ?? "");
  const [target, setTarget] = useState(search.get("repo") ?? "");
  const workspaces = useResource(() => api<Workspace[]>("GET", "/workspaces"), []);
  const [status, setStatus] = useState(search.get("status") ?? "");
  const [pages, setPages] = useState<string[]>([]); // `before` cursors of the pages shown so far
  const before = pages[pages.length - 1];
  const [workspace_id, repo_id] = target ? target.split("|") : [ws || undefined, undefined];
  const tasks = useResource(
    () =>
      api<Task[]>("GET", "/tasks" + query({ limit: PAGE, before, workspace_id, repo_id, status })),
    [before, target, ws, status],
  );
  useEffect(() => setPages([]), [target, ws, status]);
  const [showCreate, setShowCreate] = useState(false);

  return (
    <section>
      <div class="title-row">
        <h1>Tasks</h1>
        <button
          type="button"
          class="primary"
          aria-expanded={showCreate}
          onClick={() => setShowCreate(!showCreate)}
        >
          New task
        </button>
      </div>
      {showCreate && <CreateTask onCreated={(t) => navigate(`/tasks/${t.id}`)} />}
      <div class="filters" role="group" aria-label="Filters">
        <Field id="filter-workspace" label="Workspace">
          <select
            id="filter-workspace"
            value={ws}
            onChange={(e) => (setWs(e.currentTarget.value), setTarget(""))}
          >
            <option value="">All workspaces</option>
            {(workspaces.data ?? []).map((w) => (
              <option key={w.id} value={w.id}>
                {w.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="filter-repo" label="Repository">
          <RepoSelect id="filter-repo" value={target} onChange={setTarget} allowAll />
        </Field>
        <Field id="filter-status" label="Status">
          <select
            id="filter-status"
            value={status}
            onChange={(e) => setStatus(e.currentTarget.value)}
          >
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <Loaded res={tasks} what="tasks">
        {(list) => (
          <>
            {list.length === 0 ? (
              <Empty>
                No tasks{status || target ? " match these filters" : " yet: create one above"}.
              </Empty>
            ) : (
              <ul class="task-list">
                {list.map((t) => (
                  <li key={t.id}>
                    <Link href={`/tasks/${t.id}`} class="task-row">
                      <span class="desc">{t.description}</span>
                      <span class="meta">
                        <StatusBadge status={t.status} /> <span class="phase">{t.phase}</span>{" "}
                        <span class="muted">
                          {t.repo_id} · <Time iso={t.created_at} />
                        </span>
                      </span>
                    </Link>
                  </li>
                ))}
              </ul>
            )}
            <div class="pager">
              <button
                type="button"
                disabled={pages.length === 0}
                onClick={() => setPages(pages.slice(0, -1))}
              >
                Newer
              </button>
              <button
                type="button"
                disabled={list.length < PAGE}
                onClick={() => setPages([...pages, list[list.length - 1]!.id])}
              >
                Older
              </button>
            </div>
          </>
        )}
      </Loaded>
    </section>
  );
}
