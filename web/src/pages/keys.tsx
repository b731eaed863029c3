import { useState } from "preact/hooks";
import { api, storedKey, type KeyInfo, type KeyUsage, type NewKey } from "../api.js";
import {
  CopyButton,
  Empty,
  ErrorBox,
  Field,
  Loaded,
  Time,
  useAction,
  useResource,
} from "../components.js";

/** The account's keys: usage against the allowance, create (shown once), revoke (confirmed). */
export function KeysPage() {
  const me = useResource(() => api<KeyUsage>("GET", "/keys/me"), []);
  const keys = useResource(() => api<KeyInfo[]>("GET", "/keys"), []);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<NewKey | null>(null);
  const create = useAction();
  const revoke = useAction();

  return (
    <section>
      <h1>API keys</h1>
      <Loaded res={me} what="usage">
        {(u) => (
          <div class="card usage">
            <h2>Usage this month</h2>
            <p>
              <strong data-testid="usage">
                {u.tasks_this_month} of {u.monthly_limit ?? "unlimited"}
              </strong>{" "}
              tasks ({u.tier} tier)
            </p>
            {u.monthly_limit !== null && (
              <progress
                max={u.monthly_limit}
                value={u.tasks_this_month}
                aria-label="Tasks used this month"
              />
            )}
          </div>
        )}
      </Loaded>

      <form
        class="card inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void create.run(async () => {
            setCreated(await api<NewKey>("POST", "/keys/generate", { name: name.trim() }));
            setName("");
            keys.reload();
          });
        }}
      >
        <h2>Create a key</h2>
        <Field id="new-key-name" label="Name">
          <input
            id="new-key-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </Field>
        <button type="submit" class="primary" disabled={create.busy}>
          Create key
        </button>
        <ErrorBox error={create.error} />
      </form>
      {created && (
        <div class="card notice" role="status">
          <p>
            Key <strong>{created.name}</strong> created. Copy it now: it is not shown again.
          </p>
          <p class="secret">
            <code data-testid="created-key">{created.key}</code> <CopyButton text={created.key} />
          </p>
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}

      <ErrorBox error={revoke.error} />
      <Loaded res={keys} what="keys">
        {(list) =>
          list.length === 0 ? (
            <Empty>No keys.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <caption class="sr-only">The account's API keys</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Prefix</th>
                    <th scope="col">Created</th>
                    <th scope="col">Last used</th>
                    <th scope="col">State</th>
                    <th scope="col">
                      <span class="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((k) => (
                    <tr key={k.id} data-testid={`key-${k.name}`}>
                      <td>{k.name}</td>
                      <td>
                        <code>{k.prefix}…</code>
                      </td>
                      <td>
                        <Time iso={k.created_at} />
                      </td>
                      <td>
                        <Time iso={k.last_used_at} />
                      </td>
                      <td>
                        {k.revoked_at ? (
                          <span class="badge badge-cancelled">revoked</span>
                        ) : (
                          "active"
                        )}
                      </td>
                      <td>
                        {!k.revoked_at && (
                          <button
                            type="button"
                            class="danger"
                            disabled={revoke.busy}
                            onClick={() => {
                              const own = storedKey()?.startsWith(k.prefix);
                              const msg = own
                                ? `Revoke "${k.name}"? It looks like the key you are signed in with: you will be signed out.`
                                : `Revoke "${k.name}"? Programs using it will be refused at once.`;
                              if (!window.confirm(msg)) return;
                              void revoke.run(async () => {
                                await api("DELETE", `/keys/${encodeURIComponent(k.id)}`);
                                keys.reload();
                              });
                            }}
                          >
                            Revoke
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Loaded>
    </section>
  );
}
