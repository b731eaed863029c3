import { useState } from "preact/hooks";
import { api, query, type Listing, type SkillSummary } from "../api.js";
import { Empty, ErrorBox, Field, Loaded, Time, useAction, useResource } from "../components.js";

function Marketplace({ onInstalled, version }: { onInstalled: () => void; version: number }) {
  const [q, setQ] = useState("");
  const [search, setSearch] = useState("");
  // `version` changes when one of the account's skills is published or unpublished.
  const listings = useResource(
    () => api<Listing[]>("GET", "/marketplace/skills" + query({ q: search })),
    [search, version],
  );
  const install = useAction();
  return (
    <section aria-labelledby="market-title">
      <h2 id="market-title">Marketplace</h2>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setSearch(q.trim());
        }}
      >
        <Field id="market-q" label="Search skills">
          <input
            id="market-q"
            type="search"
            value={q}
            onInput={(e) => setQ(e.currentTarget.value)}
          />
        </Field>
        <button type="submit">Search</button>
      </form>
      <ErrorBox error={install.error} />
      <Loaded res={listings} what="the marketplace">
        {(list) =>
          list.length === 0 ? (
            <Empty>No published skills{search ? " match" : " yet"}.</Empty>
          ) : (
            <ul class="cards">
              {list.map((l) => (
                <li key={l.id} class="card">
                  <h3>{l.name}</h3>
                  <p>{l.description}</p>
                  <p class="muted">
                    {l.installs} installs · published <Time iso={l.published_at} />
                  </p>
                  {l.owned ? (
                    <span class="muted">Yours</span>
                  ) : (
                    <button
                      type="button"
                      disabled={install.busy}
                      onClick={() =>
                        void install.run(async () => {
                          await api(
                            "POST",
                            `/marketplace/skills/${encodeURIComponent(l.id)}/install`,
                            {},
                          );
                          onInstalled();
                        })
                      }
                    >
                      Install
                    </button>
                  )}
                </li>
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}

/** Built-in and own skills (create, delete, publish), and the marketplace. */
export function SkillsPage() {
  const skills = useResource(() => api<SkillSummary[]>("GET", "/skills"), []);
  const [published, setPublished] = useState(0);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [prompt, setPrompt] = useState("");
  const create = useAction();
  const act = useAction();
  return (
    <section>
      <h1>Skills</h1>
      <form
        class="card"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run(async () => {
            await api("POST", "/skills", {
              name: name.trim(),
              description: description.trim(),
              system_prompt_addition: prompt.trim(),
            });
            setName("");
            setDescription("");
            setPrompt("");
            skills.reload();
          });
        }}
      >
        <h2>Create a skill</h2>
        <Field
          id="skill-name"
          label="Name"
          hint="kebab-case, e.g. add-metrics"
          error={create.field("name")}
        >
          <input
            id="skill-name"
            required
            pattern="[a-z0-9]+(-[a-z0-9]+)*"
            maxLength={64}
            aria-describedby="skill-name-hint"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </Field>
        <Field id="skill-description" label="Description" error={create.field("description")}>
          <input
            id="skill-description"
            required
            maxLength={1000}
            value={description}
            onInput={(e) => setDescription(e.currentTarget.value)}
          />
        </Field>
        <Field
          id="skill-prompt"
          label="Instructions added to the task's prompt"
          error={create.field("system_prompt_addition")}
        >
          <textarea
            id="skill-prompt"
            required
            rows={4}
            maxLength={10000}
            value={prompt}
            onInput={(e) => setPrompt(e.currentTarget.value)}
          />
        </Field>
        <ErrorBox error={create.error} />
        <button type="submit" class="primary" disabled={create.busy}>
          Create skill
        </button>
      </form>
      <ErrorBox error={act.error} />
      <Loaded res={skills} what="skills">
        {(list) => (
          <ul class="cards">
            {list.map((s) => (
              <li key={s.id} class="card">
                <h2>
                  {s.name} {s.builtin && <span class="badge">built-in</span>}
                  {s.published && <span class="badge">published</span>}
                </h2>
                <p>{s.description}</p>
                {!s.builtin && (
                  <div class="actions">
                    <button
                      type="button"
                      disabled={act.busy}
                      onClick={() =>
                        void act.run(async () => {
                          await api(
                            "POST",
                            `/skills/${encodeURIComponent(s.name)}/${s.published ? "unpublish" : "publish"}`,
                          );
                          skills.reload();
                          setPublished((n) => n + 1);
                        })
                      }
                    >
                      {s.published ? "Unpublish" : "Publish"}
                    </button>
                    <button
                      type="button"
                      class="danger"
                      disabled={act.busy}
                      onClick={() => {
                        if (window.confirm(`Delete the skill "${s.name}"?`))
                          void act.run(async () => {
                            await api("DELETE", `/skills/${encodeURIComponent(s.name)}`);
                            skills.reload();
                          });
                      }}
                    >
                      Delete
                    </button>
                  </div>
                )}
              </li>
            ))}
          </ul>
        )}
      </Loaded>
      <Marketplace onInstalled={skills.reload} version={published} />
    </section>
  );
}
