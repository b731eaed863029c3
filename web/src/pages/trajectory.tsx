import { useState } from "preact/hooks";
import type { z } from "zod";
import type { trajectoryLine } from "../../../src/http/routes/tasks/trajectory.js";
import { ApiError, errorText, storedKey, type Task } from "../api.js";
import { Cost } from "../components.js";

type Line = z.infer<typeof trajectoryLine>;
type Revision = Task["revisions"][number];

const GATE_WORDS = { plan: "the plan", diff: "the changes" } as const;

/**
 * The round of each call: 0 before the first request for changes, n after the n-th (the
 * task page's "Rounds" count the same way), by the time the call was made.
 */
export function roundsOf(lines: Line[], revisions: Revision[]): number[] {
  const at = revisions.map((r) => Date.parse(r.at)).sort((a, b) => a - b);
  return lines.map((l) => {
    const t = Date.parse(l.at);
    return at.filter((r) => r <= t).length;
  });
}

/**
 * The task's model calls (GET /tasks/{id}/trajectory, NDJSON), read when opened. Calls made
 * after a request for changes are grouped under their round, so a re-plan's "plan #1" is
 * told apart from the first one's.
 */
export function Trajectory({ taskId, revisions = [] }: { taskId: string; revisions?: Revision[] }) {
  const [lines, setLines] = useState<Line[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  async function load() {
    if (lines) return;
    try {
      const key = storedKey();
      const res = await fetch(`/tasks/${encodeURIComponent(taskId)}/trajectory`, {
        headers: key ? { "X-API-Key": key } : {},
      });
      const text = await res.text();
      if (!res.ok) throw new ApiError(res.status, "http_" + res.status, text.slice(0, 300));
      setLines(
        text
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Line),
      );
    } catch (err) {
      setError(errorText(err));
    }
  }

  const rounds = lines ? roundsOf(lines, revisions) : [];
  return (
    <details
      class="trajectory"
      onToggle={(e) => void ((e.currentTarget as HTMLDetailsElement).open && load())}
    >
      <summary>Model calls (trajectory)</summary>
      {error && <p class="error">{error}</p>}
      {lines && lines.length === 0 && <p class="muted">No model calls recorded.</p>}
      {lines && lines.length > 0 && (
        <ol class="plain" data-testid="trajectory">
          {lines.map((l, i) => {
            const round = rounds[i] ?? 0;
            const revision = round > 0 ? revisions[round - 1] : undefined;
            const starts = round > 0 && (i === 0 || rounds[i - 1] !== round);
            return (
              <li key={i} data-round={round}>
                {starts && revision && (
                  <h3 class="round-start">
                    Round {round}: changes requested on {GATE_WORDS[revision.gate]}
                  </h3>
                )}
                <strong data-testid="call-label">
                  {round > 0 ? `round ${round} · ` : ""}
                  {l.stage} #{l.step}
                </strong>{" "}
                <span class="muted">{l.model}</span>{" "}
                <span class="muted">
                  {l.usage.input_tokens} in / {l.usage.output_tokens} out ·{" "}
                  <Cost
                    usd={l.usd}
                    tokens={l.usage.input_tokens + l.usage.output_tokens}
                    priced={l.priced}
                  />{" "}
                  · {(l.ms / 1000).toFixed(1)} s
                </span>
                {l.response.text && <p>{l.response.text}</p>}
                {l.response.tool_calls.map((c) => (
                  <details key={c.id}>
                    <summary>
                      <code>{c.name}</code>
                    </summary>
                    <pre>{JSON.stringify(c.input, null, 2)}</pre>
                    <pre>{l.tool_results.find((r) => r.tool_call_id === c.id)?.output ?? ""}</pre>
                  </details>
                ))}
              </li>
            );
          })}
        </ol>
      )}
    </details>
  );
}
