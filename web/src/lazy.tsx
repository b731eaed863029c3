import type { ComponentType } from "preact";
import { useEffect, useState } from "preact/hooks";
import { errorText } from "./api.js";
import { ErrorBox, Loading } from "./components.js";

/**
 * A page loaded when first shown (its own chunk: the diff and chart libraries travel only
 * with the pages that use them), so the first page stays small. Loaded modules are kept.
 */
export function lazyPage<P extends object>(
  load: () => Promise<ComponentType<P>>,
  what: string,
): ComponentType<P> {
  let loaded: ComponentType<P> | undefined;
  let pending: Promise<ComponentType<P>> | undefined;
  return function LazyPage(props: P) {
    const [, setTick] = useState(0);
    const [error, setError] = useState<string>();
    useEffect(() => {
      if (loaded) return;
      pending ??= load();
      pending.then(
        (c) => {
          loaded = c;
          setTick((t) => t + 1);
        },
        (err: unknown) => {
          pending = undefined;
          setError(errorText(err));
        },
      );
    }, []);
    if (error) return <ErrorBox error={`This page could not be loaded: ${error}`} />;
    if (!loaded) return <Loading what={what} />;
    const Page = loaded;
    return <Page {...props} />;
  };
}
