import { useEffect, useState } from "preact/hooks";
import { Link } from "wouter-preact";
import { api, type Task } from "../api.js";
import { ErrorBox, Field, StatusBadge, useAction } from "../components.js";
import { RepoSelect } from "./tasks.js";

/** One item of a planned list, as POST /prism/parse answers it and /prism/queue takes it. */
type Item = {
  id: number;
  description: string;
  skill: string | null;
  depends_on: number[];
  priority: number;
};
type Queued = { queued: string[]; execution_order: number[][] };

/** "1, 3" → [1, 3]; anything not a whole number is left for the API to name. */
function parseIds(text: string): number[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((s) => Number(s));
}

function ItemEditor({
  item,
  index,
  onChange,
  onRemove,
  error,
}: {
  item: Item;
  index: number;
  onChange: (i: Item) => void;
  onRemove: () => void;
  error: (field: string) => string | undefined;
}) {
  const p = `item-${index}`;
  return (
    <li class="card planned" data-testid={`planned-${item.id}`}>
      <div class="grid3">
        <Field id={`${p}-id`} label="Number" error={error(`tasks.${index}.id`)}>
          <input
            id={`${p}-id`}
            type="number"
            min={0}
            value={item.id}
            onInput={(e) => onChange({ ...item, id: Number(e.currentTarget.value) })}
          />
        </Field>
        <Field
          id={`${p}-deps`}
          label="Depends on"
          hint="numbers, comma-separated"
          error={error(`tasks.${index}.depends_on`)}
        >
          <input
            id={`${p}-deps`}
            value={item.depends_on.join(", ")}
            onChange={(e) => onChange({ ...item, depends_on: parseIds(e.currentTarget.value) })}
          />
        </Field>
        <Field id={`${p}-priority`} label="Priority" error={error(`tasks.${index}.priority`)}>
          <input
            id={`${p}-priority`}
            type="number"
            min={1}
            value={item.priority}
            onInput={(e) => onChange({ ...item, priority: Number(e.currentTarget.value) })}
          />
        </Field>
      </div>
      <Field id={`${p}-desc`} label="Task" error={error(`tasks.${index}.description`)}>
        <textarea
          id={`${p}-desc`}
          rows={3}
          value={item.description}
          onInput={(e) => onChange({ ...item, description: e.currentTarget.value })}
        />
      </Field>
      <Field id={`${p}-skill`} label="Skill (optional)" error={error(`tasks.${index}.skill`)}>
        <input
          id={`${p}-skill`}
          value={item.skill ?? ""}
          onInput={(e) => onChange({ ...item, skill: e.currentTarget.value.trim() || null })}
        />
      </Field>
      <button type="button" class="danger" onClick={onRemove}>
        Remove task {item.id}
      </button>
    </li>
  );
}

/** The queued tasks level by level, their status asked again every 2 s until all ended. */
function Levels({ queued, items }: { queued: Queued; items: Item[] }) {
  const [tasks, setTasks] = useState<Record<string, Task>>({});
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout>;
    const tick = async () => {
      const got = await Promise.all(
        queued.queued.map((id) =>
          api<Task>("GET", `/tasks/${encodeURIComponent(id)}`).catch(() => undefined),
        ),
      );
      if (!live) return;
      const next: Record<string, Task> = {};
      for (const t of got) if (t) next[t.id] = t;
      setTasks(next);
      const ended = got.every((t) => t && ["completed", "failed", "cancelled"].includes(t.status));
      if (!ended) timer = setTimeout(() => void tick(), 2000);
    };
    void tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [queued]);
  const taskOf = (itemId: number) => queued.queued[items.findIndex((i) => i.id === itemId)];
  return (
    <section aria-labelledby="levels-title" data-testid="levels">
      <h2 id="levels-title">Queued: {queued.queued.length} tasks</h2>
      <ol class="levels">
        {queued.execution_order.map((level, n) => (
          <li key={n}>
            <h3>Level {n + 1}</h3>
            <ul class="plain">
              {level.map((itemId) => {
                const id = taskOf(itemId);
                const t = id ? tasks[id] : undefined;
                const item = items.find((i) => i.id === itemId);
                return (
                  <li key={itemId}>
                    {t ? <StatusBadge status={t.status} /> : <span class="muted">…</span>}{" "}
                    {id ? (
                      <Link href={`/tasks/${id}`}>
                        {itemId}. {item?.description.split("\n")[0]}
                      </Link>
                    ) : (
                      item?.description
                    )}{" "}
                    {t && <span class="muted">{t.phase}</span>}
                  </li>
                );
              })}
            </ul>
          </li>
        ))}
      </ol>
    </section>
  );
}

/**
 * The spec planner: a specification becomes a task list (the model's), edited here, then
 * queued on one repository; the levels run one after another, each level's tasks together.
 */
export function PrismPage() {
  const [spec, setSpec] = useState("");
  const [items, setItems] = useState<Item[] | null>(null);
  const [target, setTarget] = useState("");
  const [autoApprove, setAutoApprove] = useState(false);
  const [queued, setQueued] = useState<Queued | null>(null);
  const parse = useAction();
  const queue = useAction();
  return (
    <section>
      <h1>Spec planner</h1>
      <form
        class="card"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          void parse.run(async () => {
            setItems(await api<Item[]>("POST", "/prism/parse", { spec: spec.trim() }));
            setQueued(null);
          });
        }}
      >
        <Field
          id="prism-spec"
          label="Specification"
          hint="Describe the product or change in plain words; the model breaks it into tasks you can edit before anything is created."
          error={parse.field("spec")}
        >
          <textarea
            id="prism-spec"
            rows={8}
            value={spec}
            onInput={(e) => setSpec(e.currentTarget.value)}
          />
        </Field>
        <ErrorBox error={parse.error} />
        <button type="submit" class="primary" disabled={parse.busy}>
          {parse.busy ? "Planning…" : "Plan tasks"}
        </button>
      </form>

      {items && !queued && (
        <form
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            const [workspace_id, repo_id] = target ? target.split("|") : ["", ""];
            void queue.run(async () => {
              setQueued(
                await api<Queued>("POST", "/prism/queue", {
                  tasks: items,
                  workspace_id,
                  repo_id,
                  auto_approve: autoApprove,
                }),
              );
            });
          }}
        >
          <h2>Tasks ({items.length})</h2>
          <ol class="plain planned-list" data-testid="planned">
            {items.map((item, i) => (
              <ItemEditor
                key={i}
                item={item}
                index={i}
                error={(f) => queue.field(f)}
                onChange={(next) => setItems(items.map((x, j) => (j === i ? next : x)))}
                onRemove={() => setItems(items.filter((_, j) => j !== i))}
              />
            ))}
          </ol>
          <button
            type="button"
            onClick={() =>
              setItems([
                ...items,
                {
                  id: Math.max(0, ...items.map((i) => i.id)) + 1,
                  description: "",
                  skill: null,
                  depends_on: [],
                  priority: 1,
                },
              ])
            }
          >
            Add a task
          </button>
          <div class="card">
            <Field
              id="prism-repo"
              label="Repository"
              error={queue.field("repo_id", "workspace_id")}
            >
              <RepoSelect id="prism-repo" value={target} onChange={setTarget} required />
            </Field>
            <div class="check">
              <input
                id="prism-auto"
                type="checkbox"
                checked={autoApprove}
                onChange={(e) => setAutoApprove(e.currentTarget.checked)}
              />
              <label for="prism-auto">Auto-approve (skip both approval gates)</label>
            </div>
            <ErrorBox error={queue.error} />
            <button type="submit" class="primary" disabled={queue.busy || items.length === 0}>
              Queue {items.length} tasks
            </button>
          </div>
        </form>
      )}
      {queued && items && <Levels queued={queued} items={items} />}
    </section>
  );
}
