import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModel, systemText } from "../helpers/agent-model.js";
import {
  fakeModelEnv,
  startFakeModel,
  type FakeModel,
  type FakeModelRequest,
} from "../helpers/fake-model.js";
import { createGitRepo, type GitFixture, placeholderRepo } from "../helpers/git-repo.js";
import { startTestServer, type TestServer } from "../helpers/server.js";
import { openTaskStream } from "../helpers/ws.js";

/*
 * Skills (docs/api.md, "Skills"): built-ins and the account's own, the naming rules, the single
 * view and the list, deletion, account isolation, tasks that name an own skill; and the skill
 * marketplace (release 1.2.0, an extension): publish, browse, install a copy, unpublish.
 */

const BUILTINS = [
  "add-tests",
  "add-openapi-docs",
  "dependency-audit",
  "add-logging",
  "add-error-handling",
];

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});

afterAll(async () => {
  await server?.stop();
});

function skillBody(name: string, overrides: Record<string, unknown> = {}) {
  return {
    name,
    description: `What ${name} does.`,
    system_prompt_addition: `Instructions of ${name}.`,
    ...overrides,
  };
}

async function create(key: string, name: string, overrides: Record<string, unknown> = {}) {
  return server.api("POST", "/skills", { key, body: skillBody(name, overrides) });
}

describe("built-in skills", () => {
  it("lists the built-ins of the interface and more, without system_prompt_addition", async () => {
    const { key } = await server.signup();
    const res = await server.api("GET", "/skills/", { key });
    expect(res.status).toBe(200);
    const names = res.body.map((s: { name: string }) => s.name);
    expect(names).toEqual(expect.arrayContaining(BUILTINS));
    expect(names.length).toBeGreaterThan(BUILTINS.length);
    for (const skill of res.body) {
      expect(skill).not.toHaveProperty("system_prompt_addition");
      expect(skill).toMatchObject({ builtin: true, published: false, installed_from: null });
      expect(typeof skill.id).toBe("string");
      expect(new Date(skill.created_at).toISOString()).toBe(skill.created_at);
    }
  });

  it("shows a built-in in full, and refuses to delete it with 403", async () => {
    const { key } = await server.signup();
    const res = await server.api("GET", "/skills/add-tests", { key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "add-tests", builtin: true });
    expect(res.body.system_prompt_addition.length).toBeGreaterThan(50);
    const del = await server.api("DELETE", "/skills/add-tests", { key });
    expect(del.status).toBe(403);
    expect(del.body.error.code).toBe("forbidden");
    expect((await server.api("GET", "/skills/add-tests", { key })).status).toBe(200);
  });
});

describe("the account's own skills", () => {
  it("creates a skill (201, full), shows it in full and lists it first without the addition", async () => {
    const { key } = await server.signup();
    const created = await create(key, "react-hooks", {
      system_prompt_addition: "Prefer hooks over classes.",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "react-hooks",
      description: "What react-hooks does.",
      system_prompt_addition: "Prefer hooks over classes.",
      builtin: false,
      published: false,
      installed_from: null,
    });
    expect(created.body.id).toMatch(/^skill_/);
    expect(Date.now() - Date.parse(created.body.created_at)).toBeLessThan(60_000);

    const one = await server.api("GET", "/skills/react-hooks/", { key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(created.body);

    await create(key, "go-errors");
    const list = await server.api("GET", "/skills", { key });
    expect(list.body.slice(0, 2).map((s: { name: string }) => s.name)).toEqual([
      "go-errors",
      "react-hooks",
    ]);
    const item = list.body[1];
    expect(item).not.toHaveProperty("system_prompt_addition");
    expect(item).toEqual({
      id: created.body.id,
      name: "react-hooks",
      description: "What react-hooks does.",
      created_at: created.body.created_at,
      builtin: false,
      published: false,
      installed_from: null,
    });
  });

  it("accepts kebab-case names of 1 to 64 characters and refuses everything else with 400", async () => {
    const { key } = await server.signup();
    for (const name of ["a", "x9", "a-b-c", "k8s-helm-2", "a".repeat(64)])
      expect((await create(key, name)).status, name).toBe(201);
    for (const name of [
      "",
      "a".repeat(65),
      "Camel-Case",
      "snake_case",
      "-leading",
      "trailing-",
      "double--hyphen",
      "with space",
      "dot.name",
      "ünïcode",
    ]) {
      const res = await create(key, name);
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      expect(res.body.error.details[0].path).toBe("body.name");
    }
  });

  it("validates the other fields strictly", async () => {
    const { key } = await server.signup();
    const cases: Array<Record<string, unknown>> = [
      { description: "" },
      { description: 5 },
      { system_prompt_addition: "   " },
      { system_prompt_addition: "x".repeat(10_001) },
      { extra: true },
    ];
    for (const overrides of cases)
      expect((await create(key, "fine-name", overrides)).status, JSON.stringify(overrides)).toBe(
        400,
      );
    const missing = await server.api("POST", "/skills", { key, body: { name: "fine-name" } });
    expect(missing.status).toBe(400);
    expect((await server.api("GET", "/skills/fine-name", { key })).status).toBe(404);
  });

  it("answers 409 for a name the account already uses, also under concurrency", async () => {
    const { key } = await server.signup();
    expect((await create(key, "dup")).status).toBe(201);
    const again = await create(key, "dup", { description: "Another." });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("conflict");
    const racing = await Promise.all(Array.from({ length: 10 }, () => create(key, "raced")));
    const statuses = racing.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(9);
    const names = (await server.api("GET", "/skills", { key })).body.map(
      (s: { name: string }) => s.name,
    );
    expect(names.filter((n: string) => n === "raced")).toHaveLength(1);
  });

  it("answers 409 for a built-in's name", async () => {
    const { key } = await server.signup();
    for (const name of [...BUILTINS, "performance-pass"]) {
      const res = await create(key, name);
      expect(res.status, name).toBe(409);
      expect(res.body.error.code).toBe("conflict");
    }
  });

  it("deletes a skill with 204 and no body; unknown is 404", async () => {
    const { key } = await server.signup();
    await create(key, "short-lived");
    const res = await fetch(`${server.url}/skills/short-lived`, {
      method: "DELETE",
      headers: { "x-api-key": key },
    });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await server.api("GET", "/skills/short-lived", { key })).status).toBe(404);
    const again = await server.api("DELETE", "/skills/short-lived", { key });
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe("not_found");
    expect((await server.api("GET", "/skills/never-was", { key })).status).toBe(404);
    // The name is free again.
    expect((await create(key, "short-lived")).status).toBe(201);
  });

  it("keeps accounts apart: another account's skill is 404 and its name is free", async () => {
    const alice = await server.signup("alice");
    const bob = await server.signup("bob");
    await create(alice.key, "alice-only");
    expect((await server.api("GET", "/skills/alice-only", { key: bob.key })).status).toBe(404);
    expect((await server.api("DELETE", "/skills/alice-only", { key: bob.key })).status).toBe(404);
    const bobs = (await server.api("GET", "/skills", { key: bob.key })).body;
    expect(bobs.map((s: { name: string }) => s.name)).not.toContain("alice-only");
    // The same name in another account is another skill.
    const bobsOwn = await create(bob.key, "alice-only", { system_prompt_addition: "Bob's." });
    expect(bobsOwn.status).toBe(201);
    const alices = await server.api("GET", "/skills/alice-only", { key: alice.key });
    expect(alices.body.system_prompt_addition).toBe("Instructions of alice-only.");
    expect(alices.body.id).not.toBe(bobsOwn.body.id);
  });

  it("needs a key", async () => {
    expect((await server.api("GET", "/skills")).status).toBe(401);
    expect((await server.api("POST", "/skills", { body: skillBody("x") })).status).toBe(401);
    expect((await server.api("DELETE", "/skills/x")).status).toBe(401);
  });
});

describe("tasks that name a skill", () => {
  it("accept the account's own skill and refuse another account's", async () => {
    const alice = await server.signup("alice");
    const bob = await server.signup("bob");
    await create(alice.key, "team-style");
    for (const who of [alice, bob]) {
      const ws = await server.api("POST", "/workspaces", {
        key: who.key,
        body: { name: "w", repos: [{ name: "acme/app", clone_url: await placeholderRepo() }] },
      });
      const res = await server.api("POST", "/tasks", {
        key: who.key,
        body: {
          workspace_id: ws.body.id,
          repo_id: "acme/app",
          description: "Tidy up.",
          skill_name: "team-style",
        },
      });
      if (who === alice) {
        expect(res.status).toBe(201);
        expect(res.body.skill_name).toBe("team-style");
      } else {
        expect(res.status).toBe(400);
        expect(res.body.error.details[0].path).toBe("skill_name");
      }
    }
  });
});

describe("the skill marketplace (extension)", () => {
  it("publishes, browses, installs an owned independent copy, and unpublishes", async () => {
    const alice = await server.signup("alice");
    const bob = await server.signup("bob");
    const addition = "Write every SQL migration as reversible, with a down step.";
    await create(alice.key, "reversible-migrations", {
      description: "Reversible database migrations.",
      system_prompt_addition: addition,
    });

    // Unpublished skills are not in the marketplace.
    const before = await server.api("GET", "/marketplace/skills?q=reversible", { key: bob.key });
    expect(before.status).toBe(200);
    expect(before.body).toEqual([]);

    const published = await server.api("POST", "/skills/reversible-migrations/publish", {
      key: alice.key,
    });
    expect(published.status).toBe(200);
    expect(published.body).toMatchObject({ name: "reversible-migrations", published: true });
    const listedAt = async () =>
      (await server.api("GET", "/marketplace/skills?q=reversible", { key: bob.key })).body[0]
        ?.published_at;
    const firstPublishedAt = await listedAt();
    expect(firstPublishedAt).toEqual(expect.any(String));
    // Publishing again changes nothing, not even the listing's date (its order).
    const republished = await server.api("POST", "/skills/reversible-migrations/publish", {
      key: alice.key,
    });
    expect(republished.status).toBe(200);
    expect(await listedAt()).toBe(firstPublishedAt);

    const browse = await server.api("GET", "/marketplace/skills/?q=REVERSIBLE", { key: bob.key });
    expect(browse.status).toBe(200);
    expect(browse.body).toHaveLength(1);
    const listed = browse.body[0];
    expect(listed).toMatchObject({
      id: published.body.id,
      name: "reversible-migrations",
      description: "Reversible database migrations.",
      installs: 0,
      owned: false,
    });
    expect(listed).not.toHaveProperty("system_prompt_addition");
    expect(JSON.stringify(listed)).not.toContain("acct_");
    const mine = await server.api("GET", "/marketplace/skills?q=reversible", { key: alice.key });
    expect(mine.body[0].owned).toBe(true);

    const detail = await server.api("GET", `/marketplace/skills/${listed.id}`, { key: bob.key });
    expect(detail.status).toBe(200);
    expect(detail.body.system_prompt_addition).toBe(addition);

    const installed = await server.api("POST", `/marketplace/skills/${listed.id}/install`, {
      key: bob.key,
      body: {},
    });
    expect(installed.status).toBe(201);
    expect(installed.body).toMatchObject({
      name: "reversible-migrations",
      description: "Reversible database migrations.",
      system_prompt_addition: addition,
      builtin: false,
      published: false,
      installed_from: listed.id,
    });
    expect(installed.body.id).not.toBe(listed.id);
    // Bob owns the copy: it is in his list and he can use it in a task.
    const bobs = await server.api("GET", "/skills/reversible-migrations", { key: bob.key });
    expect(bobs.body.id).toBe(installed.body.id);
    const after = await server.api("GET", `/marketplace/skills/${listed.id}`, { key: bob.key });
    expect(after.body.installs).toBe(1);

    // Installing a name he already has is 409; another name is a second copy.
    const twice = await server.api("POST", `/marketplace/skills/${listed.id}/install`, {
      key: bob.key,
      body: {},
    });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe("conflict");
    const renamed = await server.api("POST", `/marketplace/skills/${listed.id}/install`, {
      key: bob.key,
      body: { name: "migrations-v2" },
    });
    expect(renamed.status).toBe(201);
    expect(renamed.body.name).toBe("migrations-v2");

    // The copy is independent: the original's unpublishing and deletion leave it as it was.
    const unpublished = await server.api("POST", "/skills/reversible-migrations/unpublish", {
      key: alice.key,
    });
    expect(unpublished.status).toBe(200);
    expect(unpublished.body.published).toBe(false);
    expect(
      (await server.api("GET", `/marketplace/skills/${listed.id}`, { key: bob.key })).status,
    ).toBe(404);
    expect(
      (
        await server.api("POST", `/marketplace/skills/${listed.id}/install`, {
          key: bob.key,
          body: { name: "too-late" },
        })
      ).status,
    ).toBe(404);
    expect(
      (await server.api("GET", "/marketplace/skills?q=reversible", { key: bob.key })).body,
    ).toEqual([]);
    expect(
      (await server.api("DELETE", "/skills/reversible-migrations", { key: alice.key })).status,
    ).toBe(204);
    const kept = await server.api("GET", "/skills/reversible-migrations", { key: bob.key });
    expect(kept.status).toBe(200);
    expect(kept.body.system_prompt_addition).toBe(addition);

    // Deleting bob's copy does not touch alice's second skill of that name.
    await create(alice.key, "reversible-migrations", { system_prompt_addition: "v2" });
    expect(
      (await server.api("DELETE", "/skills/reversible-migrations", { key: bob.key })).status,
    ).toBe(204);
    const alices = await server.api("GET", "/skills/reversible-migrations", { key: alice.key });
    expect(alices.body.system_prompt_addition).toBe("v2");
  });

  it("publishes only the account's own skills: another's is 404, a built-in 403", async () => {
    const alice = await server.signup("alice");
    const bob = await server.signup("bob");
    await create(alice.key, "alice-private");
    const foreign = await server.api("POST", "/skills/alice-private/publish", { key: bob.key });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    expect(
      (await server.api("POST", "/skills/alice-private/unpublish", { key: bob.key })).status,
    ).toBe(404);
    const builtin = await server.api("POST", "/skills/add-tests/publish", { key: bob.key });
    expect(builtin.status).toBe(403);
    expect(
      (await server.api("GET", "/marketplace/skills?q=alice-private", { key: bob.key })).body,
    ).toEqual([]);
    expect(
      (await server.api("GET", "/skills/alice-private", { key: alice.key })).body.published,
    ).toBe(false);
  });

  it("pages listings newest first and answers 404 for an unknown listing", async () => {
    const alice = await server.signup("alice");
    const bob = await server.signup("bob");
    const ids: string[] = [];
    for (const name of ["paged-one", "paged-two", "paged-three"]) {
      await create(alice.key, name);
      ids.push((await server.api("POST", `/skills/${name}/publish`, { key: alice.key })).body.id);
    }
    const first = await server.api("GET", "/marketplace/skills?q=paged-&limit=2", { key: bob.key });
    expect(first.body).toHaveLength(2);
    const next = await server.api(
      "GET",
      `/marketplace/skills?q=paged-&limit=2&before=${first.body[1].id}`,
      { key: bob.key },
    );
    expect(next.body).toHaveLength(1);
    // Two pages, each listing once, newest first (publications in one millisecond tie).
    const pages = [...first.body, ...next.body] as Array<{ id: string; published_at: string }>;
    expect(pages.map((l) => l.id).sort()).toEqual([...ids].sort());
    for (let i = 1; i < pages.length; i += 1)
      expect(pages[i - 1]!.published_at >= pages[i]!.published_at).toBe(true);
    expect(pages[0]!.id === ids[2] || pages[0]!.published_at === pages[1]!.published_at).toBe(true);
    expect((await server.api("GET", "/marketplace/skills?limit=0", { key: bob.key })).status).toBe(
      400,
    );
    expect(
      (await server.api("GET", "/marketplace/skills/skill_nope", { key: bob.key })).status,
    ).toBe(404);
    expect(
      (
        await server.api("POST", "/marketplace/skills/skill_nope/install", {
          key: bob.key,
          body: {},
        })
      ).status,
    ).toBe(404);
  });
});

describe("the OpenAPI document", () => {
  it("describes the skill routes and the marketplace extension", async () => {
    const doc = (await server.api("GET", "/openapi.json")).body;
    for (const [path, method] of [
      ["/skills", "get"],
      ["/skills", "post"],
      ["/skills/{name}", "get"],
      ["/skills/{name}", "delete"],
      ["/skills/{name}/publish", "post"],
      ["/skills/{name}/unpublish", "post"],
      ["/marketplace/skills", "get"],
      ["/marketplace/skills/{id}", "get"],
      ["/marketplace/skills/{id}/install", "post"],
    ] as const)
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    expect(doc.paths["/skills/{name}"].delete.responses).toHaveProperty("204");
    expect(doc.paths["/skills/{name}"].delete.responses).toHaveProperty("403");
    expect(doc.paths["/skills"].post.responses).toHaveProperty("409");
    const { schemas } = doc.components;
    expect(schemas.Skill.required).toContain("system_prompt_addition");
    expect(schemas.SkillSummary.properties).not.toHaveProperty("system_prompt_addition");
    expect(schemas.MarketplaceSkill.required).toContain("system_prompt_addition");
  });
});

describe("a task with an own skill on a repository", () => {
  let repo: GitFixture;
  let model: FakeModel;
  let worker: TestServer;
  const planRequests: FakeModelRequest[] = [];
  const implementRequests: FakeModelRequest[] = [];

  beforeAll(async () => {
    repo = await createGitRepo({ "README.md": "# demo\n", "src/app.ts": "export const x = 1;\n" });
    model = await startFakeModel(
      agentModel({
        implement: (request) => {
          implementRequests.push(request);
          return [{ name: "finish", arguments: { summary: "Nothing to change." } }];
        },
        plan: (request) => {
          planRequests.push(request);
          return [
            {
              name: "submit_plan",
              arguments: {
                summary: "Rename x.",
                steps: [{ title: "Rename", description: "", files: ["src/app.ts"] }],
              },
            },
          ];
        },
      }),
    );
    worker = await startTestServer({
      workers: true,
      env: { ...fakeModelEnv(model, "sk-skills-test-model-key-0123456789"), EVENT_POLL_MS: "50" },
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await model?.close();
    await repo?.remove();
  });

  it("puts the skill's system_prompt_addition into the planning and implementing prompts", async () => {
    const { key } = await worker.signup();
    const ws = await worker.api("POST", "/workspaces", {
      key,
      body: { name: "local", repos: [{ name: "acme/app", clone_url: repo.dir }] },
    });
    const addition = "Name every exported constant in SCREAMING_CASE (marker 51c9).";
    await worker.api("POST", "/skills", {
      key,
      body: { name: "constant-case", description: "Constants.", system_prompt_addition: addition },
    });
    const res = await worker.api("POST", "/tasks", {
      key,
      body: {
        workspace_id: ws.body.id,
        repo_id: "acme/app",
        description: "Give x a better name.",
        skill_name: "constant-case",
      },
    });
    expect(res.status).toBe(201);
    const stream = await openTaskStream(worker.url, res.body.id, key);
    try {
      await stream.waitFor((e) => e.event_type === "plan", 30_000);
      const system = systemText(planRequests.at(-1)!);
      expect(system).toContain('Skill "constant-case"');
      expect(system).toContain(addition);
      await stream.waitFor((e) => e.event_type === "phase" && e.phase === "AWAITING_APPROVAL");
      expect((await worker.api("POST", `/tasks/${res.body.id}/approve`, { key })).status).toBe(200);
      await stream.waitFor((e) => e.event_type === "done" || e.event_type === "error", 30_000);
    } finally {
      stream.close();
    }
    expect(implementRequests.length).toBeGreaterThan(0);
    expect(systemText(implementRequests[0]!)).toContain(addition);
  });
});
