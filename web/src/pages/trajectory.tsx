import { useState } from "preact/hooks";
import type { z } from "zod";
import type { trajectoryLine } from "../../../src/http/routes/tasks/trajectory.js";
import { ApiError, errorText, storedKey } from "../api.js";

type Line = z.infer<typeof trajectoryLine>;

/** The task's model calls (GET /tasks/{id}/trajectory, NDJSON), read when opened. */
export function Trajectory({ taskId }: { taskId: string }) {
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
          {lines.map((l, i) => (
            <li key={i}>
              <strong>{l.stage}</strong> #{l.step} <span class="muted">{l.model}</span>{" "}
              <span class="muted">
                {l.usage.input_tokens} in / {l.usage.output_tokens} out · ${l.usd.toFixed(4)} ·{" "}
                {(l.ms / 1000).toFixed(1)} s
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
          ))}
        </ol>
      )}
    </details>
  );
}
