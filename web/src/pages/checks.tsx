/*
 * A task's Checks box: each check of the last verification, and what the change did test by
 * test (the task's `evidence`, docs/api.md, "Evidence"): new failures, tests fixed, tests added (and
 * reproduced), and the tests that failed before the change and still do, marked pre-existing.
 */
import type { Task } from "../api.js";

type Evidence = NonNullable<Task["evidence"]>;
type IdList = Evidence["fixed"];

/** Ids shown per list; the rest are counted. */
const SHOWN = 20;

function TestList(props: {
  title: string;
  list: IdList;
  badge: string;
  badgeClass: string;
  mark?: (id: string) => string;
}) {
  const { list } = props;
  if (list.count === 0) return null;
  const shown = list.ids.slice(0, SHOWN);
  const more = list.count - shown.length;
  return (
    <div class="test-list">
      <h3>
        {props.title} ({list.count})
      </h3>
      <ul class="plain">
        {shown.map((id) => (
          <li key={id}>
            <span class={`badge ${props.badgeClass}`}>{props.badge}</span> <code>{id}</code>
            {props.mark?.(id)}
          </li>
        ))}
        {more > 0 && <li class="muted">and {more} more</li>}
      </ul>
    </div>
  );
}

function CheckRow({ check }: { check: NonNullable<Task["checks"]>["results"][number] }) {
  return (
    <li>
      <span class={check.ok ? "ok" : "bad"}>{check.ok ? "passed" : "failed"}</span>{" "}
      {!check.ok && check.pre_existing && (
        <>
          <span class="badge badge-awaiting_approval">pre-existing</span>{" "}
        </>
      )}
      <strong>{check.name}</strong> <code>{check.command}</code>{" "}
      <span class="muted">
        {(check.duration_ms / 1000).toFixed(1)} s
        {check.tests &&
          ` · ${check.tests.passed} of ${check.tests.total} tests passed${check.tests.runner ? ` (${check.tests.runner})` : ""}`}
      </span>
    </li>
  );
}

function Tests({ evidence }: { evidence: Evidence }) {
  const reproduced = new Set(evidence.reproduced.ids);
  const t = evidence.tests;
  return (
    <>
      {t && (
        <p>
          Tests: {t.passed} passed, {t.failed} failed
          {t.skipped ? `, ${t.skipped} skipped` : ""} ({t.total} in all)
        </p>
      )}
      <TestList
        title="New failures"
        list={evidence.new_failures}
        badge="new failure"
        badgeClass="badge-failed"
      />
      <TestList
        title="Fixed: failed before the change, pass now"
        list={evidence.fixed}
        badge="fixed"
        badgeClass="badge-completed"
      />
      <TestList
        title="Added or edited by the change"
        list={evidence.added}
        badge="added"
        badgeClass="badge-running"
        mark={(id) => (reproduced.has(id) ? " — reproduced: failed before the change" : "")}
      />
      <TestList
        title="Still failing, as before the change"
        list={evidence.still_failing}
        badge="pre-existing"
        badgeClass="badge-awaiting_approval"
      />
    </>
  );
}

/** The Checks box of the task page. */
export function ChecksBox({ task }: { task: Task }) {
  const checks = task.checks;
  if (!checks) return null;
  return (
    <section aria-labelledby="checks-title" data-testid="checks">
      <h2 id="checks-title">Checks</h2>
      <p class="muted">
        From {checks.source ?? "—"} · fix attempts used: {checks.fix_attempts}
      </p>
      <ul class="plain">
        {checks.results.map((c) => (
          <CheckRow key={c.name} check={c} />
        ))}
      </ul>
      {task.evidence && <Tests evidence={task.evidence} />}
      <p class="muted">Each check's output is in the log below.</p>
    </section>
  );
}
