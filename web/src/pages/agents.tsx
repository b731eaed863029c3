import { useState } from "preact/hooks";
import { useLocation } from "wouter-preact";
import { api, type Agent, type AgentSummary, type Task } from "../api.js";
import { Empty, ErrorBox, Field, Loaded, useAction, useResource } from "../components.js";
import { RepoSelect } from "./tasks.js";

function RunAgent({ name }: { name: string }) {
  const [, navigate] = useLocation();
  const detail = useResource(
    () => api<Agent>("GET", `/agents/${encodeURIComponent(name)}`),
    [name],
  );
  const [target, setTarget] = useState("");
  const [autoApprove, setAutoApprove] = useState(false);
  const run = useAction();
  return (
    <div class="agent-run">
      <Loaded res={detail} what="the agent">
        {(a) => (
          <details>
            <summary>Task template</summary>
            <pre class="wrap">{a.task_template}</pre>
          </details>
        )}
      </Loaded>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const [workspace_id, repo_id] = target.split("|");
          void run.run(async () => {
            const t = await api<Task>("POST", `/agents/${encodeURIComponent(name)}/run`, {
              workspace_id,
              repo_id,
              auto_approve: autoApprove,
            });
            navigate(`/tasks/${t.id}`);
          });
        }}
      >
        <Field id={`run-${name}-repo`} label="Repository">
          <RepoSelect id={`run-${name}-repo`} value={target} onChange={setTarget} required />
        </Field>
        <div class="check">
          <input
            id={`run-${name}-auto`}
            type="checkbox"
            checked={autoApprove}
            onChange={(e) => setAutoApprove(e.currentTarget.checked)}
          />
          <label for={`run-${name}-auto`}>Auto-approve</label>
        </div>
        <ErrorBox error={run.error} />
        <button type="submit" class="primary" disabled={run.busy}>
          Run {name}
        </button>
      </form>
    </div>
  );
}

/** The built-in agents by category, each with Run. */
export function AgentsPage() {
  const categories = useResource(() => api<string[]>("GET", "/agents/categories"), []);
  const [category, setCategory] = useState("");
  const agents = useResource(
    () => api<AgentSummary[]>("GET", "/agents" + (category ? `?category=${category}` : "")),
    [category],
  );
  const [open, setOpen] = useState<string | null>(null);
  return (
    <section>
      <h1>Agents</h1>
      <div class="filters">
        <Field id="agent-category" label="Category">
          <select
            id="agent-category"
            value={category}
            onChange={(e) => setCategory(e.currentTarget.value)}
          >
            <option value="">All categories</option>
            {(categories.data ?? []).map((c) => (
              <option key={c} value={c}>
                {c}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <Loaded res={agents} what="agents">
        {(list) =>
          list.length === 0 ? (
            <Empty>No agents in this category.</Empty>
          ) : (
            <ul class="cards">
              {list.map((a) => (
                <li key={a.name} class="card">
                  <h2>
                    {a.name} <span class="badge">{a.category}</span>
                  </h2>
                  <p>{a.description}</p>
                  <button
                    type="button"
                    aria-expanded={open === a.name}
                    onClick={() => setOpen(open === a.name ? null : a.name)}
                  >
                    {open === a.name ? "Close" : "Run…"}
                  </button>
                  {open === a.name && <RunAgent name={a.name} />}
                </li>
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}
