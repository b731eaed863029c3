import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { Link, Redirect, Route, Router, Switch, useLocation } from "wouter-preact";
import { forgetKey, setUnauthorizedHandler, storedKey } from "./api.js";
import { AgentsPage } from "./pages/agents.js";
import { AnalyticsPage } from "./pages/analytics.js";
import { AutomationsPage } from "./pages/automations.js";
import { HealthPage } from "./pages/health.js";
import { KeysPage } from "./pages/keys.js";
import { SignInPage } from "./pages/signin.js";
import { SkillsPage } from "./pages/skills.js";
import { TaskPage } from "./pages/task.js";
import { TasksPage } from "./pages/tasks.js";
import { WorkspacesPage } from "./pages/workspaces.js";
import "./styles.css";

const NAV = [
  ["/tasks", "Tasks"],
  ["/workspaces", "Workspaces"],
  ["/agents", "Agents"],
  ["/skills", "Skills"],
  ["/automations", "Automations"],
  ["/health", "Health"],
  ["/analytics", "Analytics"],
  ["/keys", "Keys"],
] as const;

function Nav({ onSignOut }: { onSignOut: () => void }) {
  const [location] = useLocation();
  const [open, setOpen] = useState(false);
  return (
    <header class="top">
      <Link href="/tasks" class="brand">
        foreman
      </Link>
      <button
        type="button"
        class="menu-toggle"
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

function App() {
  const [key, setKey] = useState<string | null>(storedKey());
  const signOut = () => {
    forgetKey();
    setKey(null);
  };
  useEffect(() => setUnauthorizedHandler(signOut), []);

  if (!key)
    return (
      <main id="main">
        <SignInPage onSignedIn={() => setKey(storedKey())} />
      </main>
    );
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Nav onSignOut={signOut} />
      <main id="main">
        <Switch>
          <Route path="/tasks" component={TasksPage} />
          <Route path="/tasks/:id">{(p) => <TaskPage id={p.id} />}</Route>
          <Route path="/workspaces" component={WorkspacesPage} />
          <Route path="/agents" component={AgentsPage} />
          <Route path="/skills" component={SkillsPage} />
          <Route path="/automations" component={AutomationsPage} />
          <Route path="/health" component={HealthPage} />
          <Route path="/analytics" component={AnalyticsPage} />
          <Route path="/keys" component={KeysPage} />
          <Route>
            <Redirect to="/tasks" replace />
          </Route>
        </Switch>
      </main>
    </>
  );
}

render(
  <Router base="/dashboard">
    <App />
  </Router>,
  document.getElementById("app")!,
);
