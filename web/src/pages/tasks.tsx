import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { awaitingTasks } from "../awaiting.js";
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
  Cost,
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

type RepoEntry = { workspace: Workspace; repo: Repository };
let repoCache: { at: number; list: Promise<RepoEntry[]> } | undefined;

/**
 * Every repository of the account's workspaces (GET /workspaces, then each one's repos), for
 * pickers and for naming repositories in lists. One answer serves every caller for 10 s.
 */
export function loadRepositories(fresh = false): Promise<RepoEntry[]> {
  if (!fresh && repoCache && Date.now() - repoCache.at < 10_000) return repoCache.list;
  const list = (async () => {
    const ws = await api<Workspace[]>("GET", "/workspaces");
    const all = await Promise.all(
      ws.map(async (w) =>
        (await api<Repository[]>("GET", `/workspaces/${encodeURIComponent(w.id)}/repos`)).map(
          (r) => ({ workspace: w, repo: r }),
        ),
      ),
    );
    return all.flat();
  })();
  repoCache = { at: Date.now(), list };
  list.catch(() => (repoCache = undefined));
  return list;
}

/** Every repository of the account's workspaces, for pickers. */
export function useRepositories() {
  return useResource(() => loadRepositories(), []);
}

/** Repository names by `workspace_id|repo_id` (and by repo_id alone), for lists. */
export function useRepoNames(): (workspaceId: string, repoId: string) => string {
  const repos = useRepositories();
  const names = new Map<string, string>();
  for (const { workspace, repo } of repos.data ?? []) {
    names.set(`${workspace.id}|${repo.id}`, repo.full_name);
    if (!names.has(repo.id)) names.set(repo.id, repo.full_name);
  }
  return (w, r) => names.get(`${w}|${r}`) ?? names.get(r) ?? r;
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

/** The service's configuration status (GET /status), for the checklist and the model warning. */
export type ServiceStatus = {
  model: { configured: boolean; provider?: string; model?: string };
  github_app: { configured: boolean };
  public_url: { configured: boolean; value?: string };
  sandbox: { engine: string; network: string };
  missing: { setting: string; why: string }[];
  /** Who asks: the operator (the service's own machine) or a user. Absent on older services. */
  viewer?: { operator: boolean };
};

/** Whether the status is for the operator: only they are shown settings to set. */
const forOperator = (status: ServiceStatus | null | undefined) => status?.viewer?.operator === true;

let statusCache: Promise<ServiceStatus | null> | undefined;
/** GET /status once per page load; null when the service does not have the route. */
export function loadStatus(): Promise<ServiceStatus | null> {
  statusCache ??= api<ServiceStatus>("GET", "/status").catch(() => null);
  return statusCache;
}

function NoModelWarning({ operator }: { operator: boolean }) {
  return (
    <p class="warning" role="alert" data-testid="no-model">
      No model is configured on this service: a task would fail at planning and still use one of
      this month's tasks.{" "}
      {operator ? (
        <>
          Set <code>LLM_API_KEY</code> (and <code>LLM_PROVIDER</code> or <code>LLM_BASE_URL</code>)
          first.
        </>
      ) : (
        <>Ask the service's operator to configure one first.</>
      )}
    </p>
  );
}

function CreateTask({
  onCreated,
  status,
}: {
  onCreated: (t: Task) => void;
  status: ServiceStatus | null | undefined;
}) {
  const [target, setTarget] = useState("");
  const [description, setDescription] = useState("");
  const [agent, setAgent] = useState("");
  const [skill, setSkill] = useState("");
  const [autoApprove, setAutoApprove] = useState(false);
  const agents = useResource(() => api<AgentSummary[]>("GET", "/agents"), []);
  const skills = useResource(() => api<SkillSummary[]>("GET", "/skills"), []);
  const create = useAction();
  const noModel = status?.model.configured === false;
  return (
    <form
      class="card"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        const [workspace_id, repo_id] = target ? target.split("|") : ["", ""];
        if (
          noModel &&
          !window.confirm(
            "No model is configured: this task will fail at planning and still count against this month's allowance. Create it anyway?",
          )
        )
          return;
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
      {noModel && <NoModelWarning operator={forOperator(status)} />}
      <Field id="task-repo" label="Repository" error={create.field("repo_id", "workspace_id")}>
        <RepoSelect id="task-repo" value={target} onChange={setTarget} required />
      </Field>
      <Field id="task-description" label="What should change?" error={create.field("description")}>
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
        <Field id="task-agent" label="Agent (optional)" error={create.field("agent_name")}>
          <select id="task-agent" value={agent} onChange={(e) => setAgent(e.currentTarget.value)}>
            <option value="">None</option>
            {(agents.data ?? []).map((a) => (
              <option key={a.name} value={a.name}>
                {a.name} ({a.category})
              </option>
            ))}
          </select>
        </Field>
        <Field id="task-skill" label="Skill (optional)" error={create.field("skill_name")}>
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

/**
 * First steps, from the service's status and the account's own data: a model configured, a
 * workspace added, a first task. Shown until all three are done. The settings to set (the
 * variables, the App's registration page) are the operator's business: they are shown only
 * when GET /status says the viewer is the operator (until roles, issue 45: a request from
 * the service's own machine); a user reads what is off and that the operator can turn it on.
 */
function Checklist({
  status,
  workspaces,
  hasTasks,
}: {
  status: ServiceStatus | null | undefined;
  workspaces: number | undefined;
  hasTasks: boolean | undefined;
}) {
  if (status === undefined || workspaces === undefined || hasTasks === undefined) return null;
  const operator = forOperator(status);
  const noGitHub = status?.github_app.configured === false;
  const steps: { done: boolean; text: ComponentChildren }[] = [
    {
      done: status?.model.configured ?? true,
      text: status?.model.configured ? (
        <>
          A model is configured ({status.model.provider}
          {status.model.model ? ` · ${status.model.model}` : ""})
        </>
      ) : operator ? (
        <>
          Configure a model: set <code>LLM_API_KEY</code>
        </>
      ) : (
        <>A model is not configured yet: ask the service's operator to configure one</>
      ),
    },
    {
      done: workspaces > 0,
      text: (
        <>
          <Link href="/workspaces">Add a workspace</Link>{" "}
          {noGitHub
            ? "(a git repository; GitHub repositories need this service's GitHub App, not set up yet)"
            : "(a GitHub installation or a git repository)"}
        </>
      ),
    },
    { done: hasTasks, text: <>Create your first task (New task, above)</> },
  ];
  if (steps.every((s) => s.done)) return null;
  const missing = (status?.missing ?? []).filter((m) => !m.setting.startsWith("LLM_"));
  return (
    <section class="card checklist" aria-labelledby="checklist-title" data-testid="checklist">
      <h2 id="checklist-title">Getting started</h2>
      <ol>
        {steps.map((s, i) => (
          <li key={i} class={s.done ? "ok" : ""}>
            <span class="sr-only">{s.done ? "Done: " : "To do: "}</span>
            <span aria-hidden="true">{s.done ? "✓ " : "○ "}</span>
            {s.text}
          </li>
        ))}
      </ol>
      {operator && missing.length > 0 && (
        <div data-testid="operator-settings">
          <h3>For the operator</h3>
          <p class="muted">
            Shown because this page was opened from the service's own machine. The same list is in
            the log at start and in <code>GET /status</code>.
          </p>
          {missing.map((m) => (
            <p key={m.setting} class="muted">
              <code>{m.setting}</code>: {m.why}
            </p>
          ))}
        </div>
      )}
    </section>
  );
}

/** How long a task ran: to its last update once ended, to now while it runs. */
export function duration(t: Task, now = Date.now()): string {
  const end = TERMINAL.has(t.status) ? Date.parse(t.updated_at) : now;
  const s = Math.max(0, Math.round((end - Date.parse(t.created_at)) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** A task's one-line title: an agent task is named by its agent, not its whole template. */
export function taskTitle(t: Task): string {
  const first = t.description.split("\n").find((l) => l.trim()) ?? t.description;
  const line = first.length > 140 ? first.slice(0, 137) + "…" : first;
  return t.agent_name && t.description.length > 140 ? `${t.agent_name}: ${line}` : line;
}

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
/** How often an open list asks for changes (a new task shows within this). */
const LIST_EVERY_MS = 1500;

/** The task list's search and filters; each change replaces the URL's query. */
function TaskFilters({
  filters: { text, ws, target, status, awaitingOnly },
  workspaces,
  setParam,
}: {
  /** The URL's q, workspace, repo, status and awaiting. */
  filters: { text: string; ws: string; target: string; status: string; awaitingOnly: boolean };
  workspaces: Workspace[];
  setParam: (changes: Record<string, string>) => void;
}) {
  return (
    <div class="filters" role="group" aria-label="Filters">
      <Field id="filter-search" label="Search">
        <input
          id="filter-search"
          type="search"
          value={text}
          placeholder="Words of the task, repository, id"
          onInput={(e) => setParam({ q: e.currentTarget.value })}
        />
      </Field>
      <Field id="filter-workspace" label="Workspace">
        <select
          id="filter-workspace"
          value={ws}
          onChange={(e) => setParam({ workspace: e.currentTarget.value, repo: "" })}
        >
          <option value="">All workspaces</option>
          {workspaces.map((w) => (
            <option key={w.id} value={w.id}>
              {w.name}
            </option>
          ))}
        </select>
      </Field>
      <Field id="filter-repo" label="Repository">
        <RepoSelect
          id="filter-repo"
          value={target}
          onChange={(v) => setParam({ repo: v })}
          allowAll
        />
      </Field>
      <Field id="filter-status" label="Status">
        <select
          id="filter-status"
          value={awaitingOnly ? "awaiting" : status}
          onChange={(e) => {
            const v = e.currentTarget.value;
            setParam(
              v === "awaiting" ? { status: "", awaiting: "1" } : { status: v, awaiting: "" },
            );
          }}
        >
          <option value="">Any status</option>
          <option value="awaiting">awaiting you (either gate)</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.replace(/_/g, " ")}
            </option>
          ))}
        </select>
      </Field>
    </div>
  );
}

/**
 * Tasks newest first, filtered by workspace, repository and status, searched by text, paged;
 * live (asks again every 1.5 s while the tab is visible); the create form. Filters and
 * search are in the URL, so a view can be bookmarked and shared.
 */
export function TasksPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const ws = search.get("workspace") ?? "";
  const target = search.get("repo") ?? "";
  const status = search.get("status") ?? "";
  const text = search.get("q") ?? "";
  const awaitingOnly = search.get("awaiting") === "1";
  const setParam = (changes: Record<string, string>) => {
    const next = new URLSearchParams(search);
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    const qs = next.toString();
    navigate("/tasks" + (qs ? "?" + qs : ""), { replace: true });
  };
  const workspaces = useResource(() => api<Workspace[]>("GET", "/workspaces"), []);
  const [serviceStatus, setServiceStatus] = useState<ServiceStatus | null>();
  useEffect(() => void loadStatus().then(setServiceStatus), []);
  const repoName = useRepoNames();
  const [pages, setPages] = useState<string[]>([]); // `before` cursors of the pages shown so far
  const before = pages[pages.length - 1];
  const [workspace_id, repo_id] = target ? target.split("|") : [ws || undefined, undefined];
  const tasks = useResource(
    () =>
      awaitingOnly
        ? awaitingTasks()
        : api<Task[]>(
            "GET",
            "/tasks" + query({ limit: PAGE, before, workspace_id, repo_id, status }),
          ),
    [before, target, ws, status, awaitingOnly],
  );
  const [everCreated, setEverCreated] = useState<boolean>();
  useEffect(() => {
    void api<Task[]>("GET", "/tasks?limit=1").then(
      (l) => setEverCreated(l.length > 0),
      () => setEverCreated(true),
    );
  }, []);
  useEffect(() => setPages([]), [target, ws, status, awaitingOnly]);
  // Live: the page asks again while visible; the list is replaced only when it changed.
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState !== "visible") return;
      setNow(Date.now());
      tasks.refresh();
    }, LIST_EVERY_MS);
    return () => clearInterval(timer);
  }, [tasks.refresh]);
  const [showCreate, setShowCreate] = useState(false);
  const needle = text.trim().toLowerCase();
  const shown = (tasks.data ?? []).filter(
    (t) =>
      !needle ||
      t.description.toLowerCase().includes(needle) ||
      t.id.toLowerCase().includes(needle) ||
      repoName(t.workspace_id, t.repo_id).toLowerCase().includes(needle) ||
      (t.agent_name ?? "").includes(needle),
  );

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
      <Checklist
        status={serviceStatus}
        workspaces={workspaces.data?.length}
        hasTasks={everCreated}
      />
      {showCreate && (
        <CreateTask status={serviceStatus} onCreated={(t) => navigate(`/tasks/${t.id}`)} />
      )}
      <TaskFilters
        filters={{ text, ws, target, status, awaitingOnly }}
        workspaces={workspaces.data ?? []}
        setParam={setParam}
      />
      <Loaded res={tasks} what="tasks">
        {() => (
          <>
            {shown.length === 0 ? (
              <Empty>
                No tasks
                {status || target || ws || needle || awaitingOnly
                  ? " match these filters"
                  : " yet: create one above"}
                .
              </Empty>
            ) : (
              <ul class="task-list" data-testid="task-list">
                {shown.map((t) => (
                  <li key={t.id}>
                    <Link href={`/tasks/${t.id}`} class="task-row" data-task={t.id}>
                      <span class="desc" title={t.description}>
                        {taskTitle(t)}
                      </span>
                      <span class="meta">
                        <StatusBadge status={t.status} /> <span class="phase">{t.phase}</span>{" "}
                        <span class="muted">
                          <span data-testid="repo-name">{repoName(t.workspace_id, t.repo_id)}</span>
                          {t.agent_name ? ` · agent ${t.agent_name}` : ""} · {duration(t, now)} ·{" "}
                          <Cost
                            usd={t.cost.usd}
                            tokens={t.cost.input_tokens + t.cost.output_tokens}
                            digits={2}
                          />{" "}
                          · <Time iso={t.created_at} />
                        </span>
                      </span>
                    </Link>
                  </li>
                ))}
              </ul>
            )}
            {!awaitingOnly && (
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
                  disabled={(tasks.data ?? []).length < PAGE}
                  onClick={() => setPages([...pages, tasks.data![tasks.data!.length - 1]!.id])}
                >
                  Older
                </button>
              </div>
            )}
          </>
        )}
      </Loaded>
    </section>
  );
}
