import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError, errorText } from "./api.js";

/**
 * Loads with `load` when `deps` change; `reload` runs it again (after an action); `refresh`
 * runs it quietly (no loading state, no error shown over good data) and keeps the old data
 * when nothing changed, for live pages that ask again every few seconds.
 */
export function useResource<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const latest = useRef({ load, generation: 0, json: "" });
  latest.current.load = load;
  useEffect(() => {
    let live = true;
    const generation = ++latest.current.generation;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => {
        if (!live) return;
        latest.current.json = JSON.stringify(data);
        setState({ data, loading: false });
      },
      (err: unknown) => live && setState({ error: errorText(err), loading: false }),
    );
    return () => {
      live = false;
      if (latest.current.generation === generation) latest.current.generation++;
    };
    // The caller names the dependencies of `load`.
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const refresh = useCallback(() => {
    const generation = latest.current.generation;
    latest.current.load().then(
      (data) => {
        if (latest.current.generation !== generation) return;
        const json = JSON.stringify(data);
        if (json === latest.current.json) return;
        latest.current.json = json;
        setState({ data, loading: false });
      },
      () => {},
    );
  }, []);
  return { ...state, reload, refresh };
}

/** Runs an action, keeping its error and a busy flag for the button that started it. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const [fields, setFields] = useState<Record<string, string>>({});
  const run = useCallback(async (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(undefined);
    setFields({});
    try {
      await action();
      return true;
    } catch (err) {
      setError(errorText(err));
      if (err instanceof ApiError) setFields(err.fields);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return {
    busy,
    error,
    run,
    /** The API's words about one field of the last request (by its path in the body). */
    field: (...paths: string[]) => paths.map((p) => fields[p]).find(Boolean),
    clear: () => (setError(undefined), setFields({})),
  };
}

export function ErrorBox({ error }: { error?: string }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** The three states every list or page has: loading, error, or the content. */
export function Loaded<T>({
  res,
  what,
  children,
}: {
  res: { data?: T; error?: string; loading: boolean };
  what: string;
  children: (data: T) => ComponentChildren;
}) {
  if (res.error) return <ErrorBox error={res.error} />;
  if (res.data === undefined) return <Loading what={what} />;
  return <>{children(res.data)}</>;
}

export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  return (
    <time dateTime={iso} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status.replace(/_/g, " ")}</span>;
}

/** Copies `text` to the clipboard; says so for a moment. */
export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => {
          setDone(true);
          setTimeout(() => setDone(false), 1500);
        });
      }}
    >
      {done ? "Copied" : label}
    </button>
  );
}

/**
 * A labelled form field: the label is tied to the control for screen readers. `error` (the
 * API's words about this field) is shown under it, and the control is marked invalid and
 * described by it.
 */
export function Field({
  id,
  label,
  hint,
  error,
  children,
}: {
  id: string;
  label: string;
  hint?: string;
  error?: string;
  children: ComponentChildren;
}) {
  const box = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    const control = box.current?.querySelector<HTMLElement>(`[id="${CSS.escape(id)}"]`);
    if (!control) return;
    const described = new Set((control.getAttribute("aria-describedby") ?? "").split(/\s+/));
    described.delete("");
    if (hint) described.add(id + "-hint");
    if (error) {
      control.setAttribute("aria-invalid", "true");
      described.add(id + "-error");
    } else {
      control.removeAttribute("aria-invalid");
      described.delete(id + "-error");
    }
    if (described.size) control.setAttribute("aria-describedby", [...described].join(" "));
  }, [id, error, hint]);
  return (
    <div class={error ? "field invalid" : "field"} ref={box}>
      <label for={id}>{label}</label>
      {children}
      {error && (
        <small id={id + "-error"} class="field-error" data-testid={`${id}-error`}>
          {error}
        </small>
      )}
      {hint && (
        <small id={id + "-hint"} class="muted">
          {hint}
        </small>
      )}
    </div>
  );
}

/**
 * A cost in US dollars, or "unpriced" when no price is known for the model: the service
 * counts such calls at $0, which is not what they cost. `priced` comes from the API where it
 * says (trajectory lines); otherwise a cost of 0 for tokens used means no price was known.
 */
export function Cost({
  usd,
  tokens,
  priced,
  digits = 4,
}: {
  usd: number;
  tokens: number;
  priced?: boolean;
  digits?: number;
}) {
  const known = priced ?? !(usd === 0 && tokens > 0);
  if (!known)
    return (
      <span
        class="unpriced"
        title="No price is known for this model: the operator can set LLM_PRICE_INPUT_PER_MTOK and LLM_PRICE_OUTPUT_PER_MTOK"
      >
        unpriced
      </span>
    );
  return <>${usd.toFixed(digits)}</>;
}
