import { useEffect, useState } from "preact/hooks";
import { api, query, type Task } from "./api.js";

/** How often the open dashboard asks for the tasks awaiting a decision (visible tab only). */
const EVERY_MS = 3000;

/** The tasks waiting at a gate (plan or diff), newest first: what needs a person. */
export async function awaitingTasks(limit = 200): Promise<Task[]> {
  const [plans, diffs] = await Promise.all(
    (["awaiting_approval", "awaiting_diff_approval"] as const).map((status) =>
      api<Task[]>("GET", "/tasks" + query({ status, limit })),
    ),
  );
  return [...plans!, ...diffs!].sort((a, b) => b.created_at.localeCompare(a.created_at));
}

/**
 * The number of tasks awaiting a decision, kept current by asking the API as any client
 * would (GET /tasks by status) every few seconds while the tab is visible, and at once when
 * it becomes visible again or a page says something changed (`awaitingChanged()`).
 */
export function useAwaiting(): number {
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    const tick = async () => {
      if (running) return;
      running = true;
      clearTimeout(timer);
      if (document.visibilityState === "visible") {
        try {
          const list = await awaitingTasks();
          if (live) setN(list.length);
        } catch {
          // The next tick tries again; a signed-out key is handled by api().
        }
      }
      running = false;
      if (live) timer = setTimeout(() => void tick(), EVERY_MS);
    };
    const now = () => void tick();
    void tick();
    document.addEventListener("visibilitychange", now);
    window.addEventListener("foreman:tasks-changed", now);
    return () => {
      live = false;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", now);
      window.removeEventListener("foreman:tasks-changed", now);
    };
  }, []);
  return n;
}

/** Tells the navigation's count that a decision was just taken (it asks again at once). */
export function awaitingChanged(): void {
  window.dispatchEvent(new Event("foreman:tasks-changed"));
}
