import { useState } from "preact/hooks";
import { api, storeKey, type KeyUsage, type NewKey } from "../api.js";
import { CopyButton, ErrorBox, Field, useAction } from "../components.js";

/** Sign in with a key, or sign up (where the operator left sign-up open) and see the key once. */
export function SignInPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState("");
  const [remember, setRemember] = useState(false);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<NewKey | null>(null);
  const signIn = useAction();
  const signUp = useAction();

  if (created)
    return (
      <section class="card narrow">
        <h1>Your new API key</h1>
        <p>
          This is the only time the key is shown. Save it somewhere safe: it is stored only as a
          hash and cannot be shown again.
        </p>
        <p class="secret">
          <code data-testid="new-key">{created.key}</code> <CopyButton text={created.key} />
        </p>
        <button
          type="button"
          class="primary"
          onClick={() => {
            storeKey(created.key, remember);
            onSignedIn();
          }}
        >
          Continue to the dashboard
        </button>
      </section>
    );

  return (
    <div class="signin">
      <section class="card narrow" aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in</h1>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const value = key.trim();
            void signIn.run(async () => {
              await api<KeyUsage>("GET", "/keys/me", undefined, { key: value });
              storeKey(value, remember);
              onSignedIn();
            });
          }}
        >
          <Field id="api-key" label="API key">
            <input
              id="api-key"
              type="password"
              autocomplete="off"
              required
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
            />
          </Field>
          <div class="check">
            <input
              id="remember"
              type="checkbox"
              checked={remember}
              onChange={(e) => setRemember(e.currentTarget.checked)}
            />
            <label for="remember">
              Remember me on this device (stores the key in local storage)
            </label>
          </div>
          <ErrorBox error={signIn.error} />
          <button type="submit" class="primary" disabled={signIn.busy}>
            Sign in
          </button>
        </form>
      </section>
      <section class="card narrow" aria-labelledby="signup-title">
        <h2 id="signup-title">New here? Create an account</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void signUp.run(async () => {
              const k = await api<NewKey>(
                "POST",
                "/keys/generate",
                { name: name.trim() },
                { key: null },
              );
              setCreated(k);
            });
          }}
        >
          <Field id="key-name" label="Name of your first key" hint="For example: laptop, CI">
            <input
              id="key-name"
              required
              maxLength={100}
              value={name}
              aria-describedby="key-name-hint"
              onInput={(e) => setName(e.currentTarget.value)}
            />
          </Field>
          <ErrorBox error={signUp.error} />
          <button type="submit" disabled={signUp.busy}>
            Sign up
          </button>
        </form>
      </section>
    </div>
  );
}
