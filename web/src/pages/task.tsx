import type { RefObject } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { useLocation } from "wouter-preact";
import { TASK_PHASES } from "../../../src/db/task-states.js";
import type { TaskEvent } from "../../../src/domain/tasks/events.js";
import { ApiError, api, storedKey, taskSocketUrl, type Task } from "../api.js";
import { awaitingChanged } from "../awaiting.js";
import {
  Cost,
  ErrorBox,
  Field,
  Loaded,
  StatusBadge,
  Time,
  useAction,
  useResource,
} from "../components.js";
import { lazyPage } from "../lazy.js";
import { Trajectory } from "./trajectory.js";
import { ChecksBox } from "./checks.js";
import { setPageTitle } from "../title.js";
import { duration, taskTitle, useRepoNames } from "./tasks.js";

/** The diff viewer (diff2html and highlight.js): its own chunk, loaded when a diff is shown. */
const loadDiffView = () => import("../diff-view.js").then((m) => m.DiffView);
const DiffView = lazyPage(loadDiffView, "the diff");

/** The phases a task goes through, in order; FAILED is shown apart, when reached. */
const PHASES = TASK_PHASES.filter((p) => p !== "FAILED");
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

type Live = {
  /** Phase events, for the timeline. */
  phases: Extract<TaskEvent, { event_type: "phase" }>[];
  /** Log and error lines, for the log. */
  lines: TaskEvent[];
  connected: boolean;
  ended: boolean;
};

/**
 * The task's event stream: replayed from the start on connect (so a reload loses nothing),
 * then live. Events of one burst are applied together, so a replay of thousands of events
 * renders once, not once per event. Reconnects after an abnormal close with `?since=`.
 */
function useTaskEvents(
  id: string,
  onChange: () => void,
  generation: number,
  isRunning: () => boolean,
): Live {
  const [live, setLive] = useState<Live>({ phases: [], lines: [], connected: false, ended: false });
  const change = useRef(onChange);
  change.current = onChange;
  const running = useRef(isRunning);
  running.current = isRunning;
  // The last event seen, kept across reconnections of the same task.
  const seen = useRef({ id, seq: 0 });
  if (seen.current.id !== id) seen.current = { id, seq: 0 };
  useEffect(() => setLive({ phases: [], lines: [], connected: false, ended: false }), [id]);
  useEffect(() => {
    let socket: WebSocket | undefined;
    const cursor = seen.current;
    let stopped = false;
    let pending: TaskEvent[] = [];
    let frame = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let failures = 0; // consecutive connections that never opened (refused key, server down)
    const flush = () => {
      frame = 0;
      const batch = pending;
      pending = [];
      const significant = batch.some((e) => e.event_type !== "log");
      const ended = batch.some((e) => e.event_type === "done" || e.event_type === "error");
      const phases = batch.filter((e) => e.event_type === "phase");
      const lines = batch.filter((e) => e.event_type === "log" || e.event_type === "error");
      setLive((s) => ({
        ...s,
        phases: phases.length ? s.phases.concat(phases) : s.phases,
        lines: lines.length ? s.lines.concat(lines) : s.lines,
        ended: s.ended || ended,
      }));
      if (significant) change.current();
    };
    const connect = () => {
      const key = storedKey();
      if (!key || stopped) return;
      socket = new WebSocket(taskSocketUrl(id, cursor.seq), ["api-key." + key]);
      socket.onopen = () => {
        failures = 0;
        setLive((s) => ({ ...s, connected: true, ended: false }));
      };
      socket.onmessage = (m) => {
        const event = JSON.parse(String(m.data)) as TaskEvent;
        if (event.seq <= cursor.seq) return;
        cursor.seq = event.seq;
        pending.push(event);
        frame ||= requestAnimationFrame(flush);
      };
      socket.onclose = (c) => {
        setLive((s) => ({ ...s, connected: false }));
        if (!c.wasClean) failures++;
        // 1000: the task ended and the server closed the stream; 1008/4xxx: refused.
        if (!stopped && c.code !== 1000 && c.code !== 1008 && c.code < 4000 && failures < 5)
          retry = setTimeout(connect, 1000 * 2 ** failures);
        // Closed at an ending, yet the task runs again (it was retried): follow what came after.
        else if (!stopped && c.code === 1000)
          retry = setTimeout(() => {
            if (running.current()) connect();
          }, 1500);
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      if (frame) cancelAnimationFrame(frame);
      socket?.close();
    };
    // A new generation (the task was retried after its stream ended) connects again and
    // continues after the last event seen.
  }, [id, generation]);
  return live;
}

function Timeline({ task, phases }: { task: Task; phases: Live["phases"] }) {
  const reached = new Map<string, string>();
  for (const e of phases) if (!reached.has(e.phase)) reached.set(e.phase, e.ts);
  const failed = task.phase === "FAILED";
  return (
    <ol class="timeline" aria-label="Phases">
      {PHASES.map((p) => {
        const current = task.phase === p;
        const state = current ? "current" : reached.has(p) ? "done" : "todo";
        return (
          <li key={p} class={`phase-${state}`} aria-current={current ? "step" : undefined}>
            <span class="dot" aria-hidden="true" />
            <span>{p.replace(/_/g, " ")}</span>
            {reached.has(p) && (
              <time dateTime={reached.get(p)}>
                {new Date(reached.get(p)!).toLocaleTimeString()}
              </time>
            )}
          </li>
        );
      })}
      {failed && (
        <li class="phase-failed" aria-current="step">
          <span class="dot" aria-hidden="true" />
          <span>FAILED</span>
        </li>
      )}
    </ol>
  );
}

type Revision = Task["revisions"][number];
const GATE_WORDS = { plan: "the plan", diff: "the changes" } as const;

/**
 * Calls a decision endpoint; a 409 (someone else decided first) becomes a plain message,
 * shown by the page (the gate itself goes away with the new state).
 */
function useDecision(task: Task, onDone: () => void, setNote: (note: string) => void) {
  const action = useAction();
  const decide = (path: string, body?: unknown) =>
    action.run(async () => {
      try {
        await api("POST", `/tasks/${encodeURIComponent(task.id)}/${path}`, body);
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          setNote(
            `This task is no longer waiting for that decision (${err.message}). The page shows its current state.`,
          );
          onDone();
          return;
        }
        throw err;
      }
      awaitingChanged();
      onDone();
    });
  return { action, decide };
}

/**
 * One gate: approve; request changes with a comment (the task works on it and comes back to
 * this gate); reject, after a confirmation, with an optional reason.
 */
function Gate({
  task,
  gate,
  onDone,
  onNote,
}: {
  task: Task;
  gate: "plan" | "diff";
  onDone: () => void;
  onNote: (note: string) => void;
}) {
  const { action, decide } = useDecision(task, onDone, onNote);
  const [mode, setMode] = useState<"none" | "revise">("none");
  const [feedback, setFeedback] = useState("");
  const [reason, setReason] = useState("");
  const dialog = useRef<HTMLDialogElement>(null);
  const what = gate === "plan" ? "plan" : "diff";
  const id = `${gate}-gate`;
  return (
    <div class="gate" role="group" aria-label={`Decision on ${GATE_WORDS[gate]}`} id={id}>
      <div class="gate-buttons">
        <button
          type="button"
          class="primary"
          disabled={action.busy}
          onClick={() => void decide(gate === "plan" ? "approve" : "approve-diff")}
        >
          Approve {what}
        </button>
        <button
          type="button"
          aria-expanded={mode === "revise"}
          aria-controls={`${id}-revise`}
          disabled={action.busy}
          onClick={() => setMode(mode === "revise" ? "none" : "revise")}
        >
          Request changes
        </button>
        <button
          type="button"
          class="danger"
          disabled={action.busy}
          onClick={() => dialog.current?.showModal()}
        >
          Reject {what}
        </button>
      </div>
      {mode === "revise" && (
        <form
          id={`${id}-revise`}
          class="revise"
          onSubmit={(e) => {
            e.preventDefault();
            void decide("revise", { feedback: feedback.trim() }).then((ok) => {
              if (ok) {
                setFeedback("");
                setMode("none");
              }
            });
          }}
        >
          <Field
            id={`${id}-feedback`}
            label={`What should change in ${GATE_WORDS[gate]}?`}
            hint={
              gate === "plan"
                ? "The task plans again with your comment and the current plan, then waits here again."
                : "The task makes a round of changes for your comment on top of this diff, checks and reviews it, then waits here again."
            }
            error={action.field("feedback")}
          >
            <textarea
              id={`${id}-feedback`}
              rows={3}
              maxLength={10000}
              value={feedback}
              onInput={(e) => setFeedback(e.currentTarget.value)}
            />
          </Field>
          <button type="submit" class="primary" disabled={action.busy}>
            Send feedback
          </button>
        </form>
      )}
      <RejectDialog
        id={id}
        gate={gate}
        dialog={dialog}
        reason={reason}
        onReason={setReason}
        onReject={(r) =>
          void decide(gate === "plan" ? "reject" : "reject-diff", r ? { reason: r } : undefined)
        }
      />
      <ErrorBox error={action.error} />
    </div>
  );
}

/** The confirmation a gate's Reject opens, with an optional reason. */
function RejectDialog({
  id,
  gate,
  dialog,
  reason,
  onReason,
  onReject,
}: {
  id: string;
  gate: "plan" | "diff";
  dialog: RefObject<HTMLDialogElement>;
  reason: string;
  onReason: (reason: string) => void;
  /** The trimmed reason; empty when none was given. */
  onReject: (reason: string) => void;
}) {
  return (
    <dialog ref={dialog} aria-labelledby={`${id}-reject-title`} class="confirm">
      <form
        method="dialog"
        onSubmit={(e) => {
          const submitter = (e as SubmitEvent).submitter as HTMLButtonElement | null;
          if (submitter?.value !== "reject") return;
          onReject(reason.trim());
        }}
      >
        <h2 id={`${id}-reject-title`}>Reject {GATE_WORDS[gate]}?</h2>
        <p>
          The task is cancelled and nothing is pushed. To change a detail instead, use Request
          changes.
        </p>
        <Field
          id={`${id}-reason`}
          label="Reason (optional)"
          hint="Kept on the task and remembered for this repository."
        >
          <textarea
            id={`${id}-reason`}
            rows={2}
            maxLength={10000}
            value={reason}
            onInput={(e) => onReason(e.currentTarget.value)}
          />
        </Field>
        <div class="gate-buttons">
          <button type="submit" value="reject" class="danger">
            Confirm rejection
          </button>
          <button type="submit" value="keep">
            Keep the task
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** Retry a failed task where it failed, with an optional hint. */
function Retry({ task, onDone }: { task: Task; onDone: () => void }) {
  const act = useAction();
  const [feedback, setFeedback] = useState("");
  return (
    <form
      class="card"
      aria-labelledby="retry-title"
      onSubmit={(e) => {
        e.preventDefault();
        const f = feedback.trim();
        void act.run(async () => {
          await api(
            "POST",
            `/tasks/${encodeURIComponent(task.id)}/retry`,
            f ? { feedback: f } : {},
          );
          setFeedback("");
          onDone();
        });
      }}
    >
      <h2 id="retry-title">Retry</h2>
      <p class="muted">
        Starts again at the stage that failed, keeping the approved plan and the work done.
      </p>
      <Field
        id="retry-feedback"
        label="Hint for the retry (optional)"
        error={act.field("feedback")}
      >
        <textarea
          id="retry-feedback"
          rows={2}
          maxLength={10000}
          value={feedback}
          onInput={(e) => setFeedback(e.currentTarget.value)}
        />
      </Field>
      <ErrorBox error={act.error} />
      <button type="submit" class="primary" disabled={act.busy}>
        Retry task
      </button>
    </form>
  );
}

/** Follow up a finished task: a new task on the same branch and pull request. */
function FollowUp({ task }: { task: Task }) {
  const act = useAction();
  const [, navigate] = useLocation();
  const [description, setDescription] = useState("");
  return (
    <form
      class="card"
      aria-labelledby="follow-title"
      onSubmit={(e) => {
        e.preventDefault();
        void act.run(async () => {
          const t = await api<Task>("POST", `/tasks/${encodeURIComponent(task.id)}/follow-up`, {
            description: description.trim(),
          });
          navigate(`/tasks/${t.id}`);
        });
      }}
    >
      <h2 id="follow-title">Follow up</h2>
      <p class="muted">
        A new task that continues from this branch's head and pushes to the same branch
        {task.pr_url ? " and pull request" : ""}.
      </p>
      <Field
        id="follow-description"
        label="What should change next?"
        error={act.field("description")}
      >
        <textarea
          id="follow-description"
          rows={3}
          maxLength={20000}
          value={description}
          onInput={(e) => setDescription(e.currentTarget.value)}
        />
      </Field>
      <ErrorBox error={act.error} />
      <button type="submit" class="primary" disabled={act.busy}>
        Follow up
      </button>
    </form>
  );
}

/** The rounds of feedback: who asked what at which gate, and the plan or diff it produced. */
function Rounds({ revisions }: { revisions: Revision[] }) {
  const [open, setOpen] = useState<Record<number, boolean>>({});
  return (
    <section aria-labelledby="rounds-title">
      <h2 id="rounds-title">Rounds</h2>
      <ol class="rounds" data-testid="rounds">
        {revisions.map((r, i) => (
          <li key={i}>
            <details
              open={open[i]}
              onToggle={(e) => setOpen({ ...open, [i]: e.currentTarget.open })}
            >
              <summary>
                Round {i + 1}: changes requested on {GATE_WORDS[r.gate]} by {r.by} ·{" "}
                <Time iso={r.at} />
                {r.plan || r.diff ? "" : " · in progress"}
              </summary>
              <blockquote class="feedback">{r.feedback}</blockquote>
              {r.plan && (
                <ol class="plan">
                  {r.plan.map((s) => (
                    <li key={s.step}>
                      <strong>{s.title}</strong>
                      <p>{s.description}</p>
                    </li>
                  ))}
                </ol>
              )}
              {r.diff && open[i] && <DiffView diff={r.diff} label={`Round ${i + 1}`} />}
            </details>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** The log: follows its end while the reader is there, scrollable and focusable by keyboard. */
function Log({ lines }: { lines: TaskEvent[] }) {
  const box = useRef<HTMLDivElement>(null);
  const [following, setFollowing] = useState(true);
  useLayoutEffect(() => {
    const el = box.current;
    if (el && following) el.scrollTop = el.scrollHeight;
  }, [lines, following]);
  if (lines.length === 0) return <p class="muted">No log lines yet.</p>;
  return (
    <>
      <div
        class="log"
        ref={box}
        data-testid="log"
        role="log"
        aria-label="Task log"
        tabIndex={0}
        onScroll={(e) => {
          const el = e.currentTarget;
          const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 24;
          if (atEnd !== following) setFollowing(atEnd);
        }}
      >
        <ol>
          {lines.map((e) => (
            <li key={e.seq} class={e.event_type === "error" ? "bad" : ""}>
              <time dateTime={e.ts}>{e.ts.slice(11, 19)}</time>{" "}
              <span>
                {e.event_type === "log" ? e.message : e.event_type === "error" ? e.error : ""}
              </span>
            </li>
          ))}
        </ol>
      </div>
      {!following && (
        <button type="button" class="follow" onClick={() => setFollowing(true)}>
          Follow the end of the log
        </button>
      )}
    </>
  );
}

/** The task's elapsed time, ticking every second while it runs (only this re-renders). */
function Elapsed({ task }: { task: Task }) {
  const running = !TERMINAL.has(task.status);
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!running) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [running]);
  return <>{duration(task, now)}</>;
}

const NO_COMMENTS: NonNullable<Task["review"]>["comments"] = [];

/** What the task waits for, in words, with a link to where it is decided. */
function pending(t: Task): { text: string; href?: string } {
  switch (t.status) {
    case "awaiting_approval":
      return { text: "Waiting for you: approve the plan or request changes", href: "#plan-gate" };
    case "awaiting_diff_approval":
      return {
        text: "Waiting for you: approve the changes or request changes",
        href: "#diff-gate",
      };
    case "failed":
      return { text: "Failed: you can retry it", href: "#retry-title" };
    case "completed":
      return t.branch
        ? { text: "Done: you can follow it up", href: "#follow-title" }
        : { text: "Done" };
    case "cancelled":
      return { text: "Cancelled" };
    default:
      return { text: "Working: nothing to decide yet" };
  }
}

/** The task page: live phases and log, plan and diff with their gates, review, checks, cost. */
export function TaskPage({ id }: { id: string }) {
  const task = useResource(() => api<Task>("GET", `/tasks/${encodeURIComponent(id)}`), [id]);
  // Most task pages show a diff: its code loads while the task is fetched, not after.
  useEffect(() => void loadDiffView().catch(() => undefined), []);
  const [generation, setGeneration] = useState(0);
  const runningNow = useRef(false);
  runningNow.current = !!task.data && !TERMINAL.has(task.data.status);
  const live = useTaskEvents(id, task.refresh, generation, () => runningNow.current);
  const cancel = useAction();
  const [notice, setNotice] = useState<string>();
  const repoName = useRepoNames();
  useEffect(() => {
    if (task.data) setPageTitle(`Task: ${taskTitle(task.data)}`);
  }, [task.data?.description]);

  return (
    <Loaded res={task} what="the task">
      {(t) => (
        <article class="task">
          <TaskHead
            task={t}
            live={live}
            where={repoName(t.workspace_id, t.repo_id)}
            cancel={cancel}
            onCancelled={task.reload}
            notice={notice}
          />

          {t.status === "failed" && (
            <Retry
              task={t}
              onDone={() => {
                task.reload();
                setGeneration((g) => g + 1);
              }}
            />
          )}
          {t.status === "completed" && t.phase === "DONE" && t.branch && <FollowUp task={t} />}

          <section aria-labelledby="phases-title">
            <h2 id="phases-title">Progress</h2>
            <Timeline task={t} phases={live.phases} />
          </section>

          {t.plan && <PlanSection task={t} plan={t.plan} onDone={task.reload} onNote={setNotice} />}

          {t.revisions.length > 0 && <Rounds revisions={t.revisions} />}

          {t.review && (
            <section aria-labelledby="review-title">
              <h2 id="review-title">Review</h2>
              <p>
                <span class={`badge verdict-${t.review.verdict}`}>
                  {t.review.verdict.replace(/_/g, " ")}
                </span>{" "}
                {t.review.summary}
              </p>
            </section>
          )}

          {t.diff !== null && (
            <section aria-labelledby="diff-title">
              <h2 id="diff-title">Changes</h2>
              {t.status === "awaiting_diff_approval" && (
                <Gate task={t} gate="diff" onDone={task.reload} onNote={setNotice} />
              )}
              {t.diff ? (
                <DiffView diff={t.diff} comments={t.review?.comments ?? NO_COMMENTS} />
              ) : (
                <p class="muted">No changes.</p>
              )}
            </section>
          )}

          <ChecksBox task={t} />

          <Trajectory taskId={t.id} revisions={t.revisions} />

          <section aria-labelledby="log-title">
            <h2 id="log-title">Log</h2>
            <Log lines={live.lines} />
          </section>
        </article>
      )}
    </Loaded>
  );
}

/**
 * The task page's header: title, status bar (what it waits for, whether the stream is live),
 * repository and origin, facts, the cancel button and the task's error.
 */
function TaskHead({
  task: t,
  live,
  where,
  cancel,
  onCancelled,
  notice,
}: {
  task: Task;
  live: Live;
  /** The repository's name. */
  where: string;
  cancel: ReturnType<typeof useAction>;
  onCancelled: () => void;
  notice: string | undefined;
}) {
  const wait = pending(t);
  return (
    <header class="task-head">
      <h1>{taskTitle(t)}</h1>
      {t.description !== taskTitle(t) && (
        <details class="full-description">
          <summary>Full description</summary>
          <p class="wrap">{t.description}</p>
        </details>
      )}
      <div class="task-bar" data-testid="task-bar">
        <StatusBadge status={t.status} /> <span data-testid="phase">{t.phase}</span>
        <span class="muted" data-testid="elapsed">
          {" "}
          · <Elapsed task={t} />
        </span>
        <span class="pending" data-testid="pending">
          {wait.href ? <a href={wait.href}>{wait.text}</a> : wait.text}
        </span>
        <span class="muted" aria-live="polite">
          {live.connected ? "live" : live.ended ? "finished" : "connecting…"}
        </span>
      </div>
      <p class="muted">
        {where}
        {t.agent_name ? ` · agent ${t.agent_name}` : ""} · created <Time iso={t.created_at} />
        {t.parent_task_id && (
          <>
            {" "}
            · follows up <a href={`/dashboard/tasks/${t.parent_task_id}`}>a finished task</a>
          </>
        )}
      </p>
      <TaskFacts task={t} />
      {!TERMINAL.has(t.status) && (
        <button
          type="button"
          class="danger"
          disabled={cancel.busy}
          onClick={() => {
            if (window.confirm("Cancel this task? Nothing more will be done or pushed."))
              void cancel.run(async () => {
                await api("POST", `/tasks/${encodeURIComponent(t.id)}/cancel`);
                onCancelled();
              });
          }}
        >
          Cancel task
        </button>
      )}
      <ErrorBox error={cancel.error} />
      {notice && <p role="status">{notice}</p>}
      {t.error && (
        <p class="error" role="alert" data-testid="task-error">
          {t.error}
        </p>
      )}
    </header>
  );
}

/** Branch, pull request, tokens and cost of a task. */
function TaskFacts({ task: t }: { task: Task }) {
  return (
    <dl class="facts">
      <div>
        <dt>Branch</dt>
        <dd data-testid="branch">{t.branch ?? "—"}</dd>
      </div>
      <div>
        <dt>Pull request</dt>
        <dd>
          {t.pr_url ? (
            <a href={t.pr_url} target="_blank" rel="noopener noreferrer">
              {t.pr_url}
            </a>
          ) : (
            "—"
          )}
        </dd>
      </div>
      <div>
        <dt>Tokens</dt>
        <dd>
          {t.cost.input_tokens.toLocaleString()} in / {t.cost.output_tokens.toLocaleString()} out
        </dd>
      </div>
      <div>
        <dt>Cost</dt>
        <dd data-testid="task-cost">
          <Cost usd={t.cost.usd} tokens={t.cost.input_tokens + t.cost.output_tokens} />
        </dd>
      </div>
    </dl>
  );
}

/** The plan's steps and the files each touches; its gate while the task waits for approval. */
function PlanSection({
  task: t,
  plan,
  onDone,
  onNote,
}: {
  task: Task;
  plan: NonNullable<Task["plan"]>;
  onDone: () => void;
  onNote: (note: string) => void;
}) {
  return (
    <section aria-labelledby="plan-title">
      <h2 id="plan-title">Plan</h2>
      {t.plan_summary && <p>{t.plan_summary}</p>}
      <ol class="plan">
        {plan.map((s) => (
          <li key={s.step}>
            <strong>{s.title}</strong>
            <p>{s.description}</p>
            {s.files.length > 0 && (
              <p class="muted">
                Files:{" "}
                {s.files.map((f) => (
                  <code key={f}>{f} </code>
                ))}
              </p>
            )}
          </li>
        ))}
      </ol>
      {t.status === "awaiting_approval" && (
        <Gate task={t} gate="plan" onDone={onDone} onNote={onNote} />
      )}
    </section>
  );
}
