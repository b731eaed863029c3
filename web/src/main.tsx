import { render } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { Link, Redirect, Route, Router, Switch, useLocation } from "wouter-preact";
import { forgetKey, setUnauthorizedHandler, storedKey } from "./api.js";
import { useAwaiting } from "./awaiting.js";
import { lazyPage } from "./lazy.js";
import { SignInPage } from "./pages/signin.js";
import { TasksPage } from "./pages/tasks.js";
import { setAwaitingCount, setPageTitle } from "./title.js";
import "./styles.css";

/*
 * The task list is the first page and comes with the bundle; every other page is its own
 * chunk, loaded when first visited (the diff and chart libraries only with their pages).
 */
const TaskPage = lazyPage(() => import("./pages/task.js").then((m) => m.TaskPage), "the task");
const WorkspacesPage = lazyPage(
  () => import("./pages/workspaces.js").then((m) => m.WorkspacesPage),
  "workspaces",
);
const AgentsPage = lazyPage(() => import("./pages/agents.js").then((m) => m.AgentsPage), "agents");
const SkillsPage = lazyPage(() => import("./pages/skills.js").then((m) => m.SkillsPage), "skills");
const AutomationsPage = lazyPage(
  () => import("./pages/automations.js").then((m) => m.AutomationsPage),
  "automations",
);
const HealthPage = lazyPage(() => import("./pages/health.js").then((m) => m.HealthPage), "health");
const AnalyticsPage = lazyPage(
  () => import("./pages/analytics.js").then((m) => m.AnalyticsPage),
  "analytics",
);
const KeysPage = lazyPage(() => import("./pages/keys.js").then((m) => m.KeysPage), "keys");
const PrismPage = lazyPage(
  () => import("./pages/prism.js").then((m) => m.PrismPage),
  "the spec planner",
);
const IntegrationsPage = lazyPage(
  () => import("./pages/integrations.js").then((m) => m.IntegrationsPage),
  "integrations",
);

const SettingsPage = lazyPage(
  () => import("./pages/settings.js").then((m) => m.SettingsPage),
  "settings",
);

const NAV = [
  ["/tasks", "Tasks"],
  ["/prism", "Spec planner"],
  ["/workspaces", "Workspaces"],
  ["/agents", "Agents"],
  ["/skills", "Skills"],
  ["/automations", "Automations"],
  ["/integrations", "Integrations"],
  ["/health", "Health"],
  ["/analytics", "Analytics"],
  ["/keys", "Keys"],
  ["/settings", "Settings"],
] as const;

function Nav({ onSignOut, awaiting }: { onSignOut: () => void; awaiting: number }) {
  const [location] = useLocation();
  const [open, setOpen] = useState(false);
  const toggle = useRef<HTMLButtonElement>(null);
  // Escape closes the menu and gives the focus back to its button. Listened for from the
  // render that opens the menu (a layout effect): Preact runs a plain effect after the next
  // frame, so an Escape pressed as soon as the menu showed could find no listener yet (the
  // phone-screen end-to-end test did, on a loaded machine).
  useLayoutEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "Escape") return;
      setOpen(false);
      toggle.current?.focus();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [open]);
  return (
    <header class="top">
      <Link href="/tasks" class="brand">
        foreman
      </Link>
      <Link
        href="/tasks?awaiting=1"
        class={awaiting ? "awaiting has" : "awaiting"}
        data-testid="awaiting"
        title="Tasks waiting for your decision at a gate"
      >
        {awaiting} awaiting you
      </Link>
      <button
        type="button"
        class="menu-toggle"
        ref={toggle}
        aria-expanded={open}
        aria-controls="main-nav"
        onClick={() => setOpen(!open)}
      >
        Menu
      </button>
      <nav id="main-nav" aria-label="Main" class={open ? "open" : ""}>
        <ul>
          {NAV.map(([href, label]) => (
            <li key={href}>
              <Link
                href={href}
                aria-current={
                  location === href || location.startsWith(href + "/") ? "page" : undefined
                }
                onClick={() => setOpen(false)}
              >
                {label}
              </Link>
            </li>
          ))}
        </ul>
        <button type="button" class="link" onClick={onSignOut}>
          Sign out
        </button>
      </nav>
    </header>
  );
}

/** The tab's title for a path; the task page names its task once loaded. */
function titleOf(location: string): string {
  if (/^\/tasks\/[^/]+/.test(location)) return "Task";
  if (location === "/" || location === "") return "Tasks";
  return (
    NAV.find(([href]) => location === href || location.startsWith(href + "/"))?.[1] ?? "Not found"
  );
}

/** A dashboard path that is no page: said so, with the way back, rather than a silent redirect. */
function NotFound() {
  const [location] = useLocation();
  return (
    <section data-testid="not-found">
      <h1>Page not found</h1>
      <p>
        The dashboard has no page at <code>/dashboard{location}</code>.
      </p>
      <p>
        <Link href="/tasks">Go to Tasks</Link>
      </p>
    </section>
  );
}

/**
 * After a route change the focus moves to the new page's heading (screen readers announce
 * it; the keyboard starts from the top of the content), once the page has drawn it.
 */
function useFocusOnRouteChange(location: string) {
  const first = useRef(true);
  useEffect(() => {
    setPageTitle(titleOf(location));
    if (first.current) {
      first.current = false;
      return;
    }
    let frame = 0;
    const until = performance.now() + 5000;
    const look = () => {
      const h1 = document.querySelector<HTMLElement>("#main h1");
      if (h1) {
        if (!h1.hasAttribute("tabindex")) h1.setAttribute("tabindex", "-1");
        h1.focus({ preventScroll: false });
        return;
      }
      if (performance.now() < until) frame = requestAnimationFrame(look);
    };
    frame = requestAnimationFrame(look);
    return () => cancelAnimationFrame(frame);
  }, [location]);
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const [location] = useLocation();
  const awaiting = useAwaiting();
  useEffect(() => setAwaitingCount(awaiting), [awaiting]);
  useFocusOnRouteChange(location);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Nav onSignOut={onSignOut} awaiting={awaiting} />
      <main id="main">
        <Switch>
          <Route path="/tasks" component={TasksPage} />
          <Route path="/tasks/:id">{(p) => <TaskPage id={p.id} />}</Route>
          <Route path="/prism">
            <PrismPage />
          </Route>
          <Route path="/workspaces">
            <WorkspacesPage />
          </Route>
          <Route path="/agents">
            <AgentsPage />
          </Route>
          <Route path="/skills">
            <SkillsPage />
          </Route>
          <Route path="/automations">
            <AutomationsPage />
          </Route>
          <Route path="/integrations">
            <IntegrationsPage />
          </Route>
          <Route path="/health">
            <HealthPage />
          </Route>
          <Route path="/analytics">
            <AnalyticsPage />
          </Route>
          <Route path="/keys">
            <KeysPage />
          </Route>
          <Route path="/settings">
            <SettingsPage />
          </Route>
          <Route path="/">
            <Redirect to="/tasks" replace />
          </Route>
          <Route>
            <NotFound />
          </Route>
        </Switch>
      </main>
    </>
  );
}

function App() {
  const [key, setKey] = useState<string | null>(storedKey());
  const signOut = () => {
    forgetKey();
    setKey(null);
  };
  useEffect(() => setUnauthorizedHandler(signOut), []);
  useEffect(() => {
    if (!key) setPageTitle("Sign in");
  }, [key]);

  if (!key)
    return (
      <main id="main">
        <SignInPage onSignedIn={() => setKey(storedKey())} />
      </main>
    );
  return <Shell onSignOut={signOut} />;
}

render(
  <Router base="/dashboard">
    <App />
  </Router>,
  document.getElementById("app")!,
);
