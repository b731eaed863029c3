import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  DOT_PATH,
  globMatches,
  matchesPayload,
  readPath,
  renderTemplate,
  toText,
  verifySignature,
} from "../../src/domain/automations/templates.js";

/** The pure rules of automations: dot-paths, `match`, templates, signatures and globs. */

const payload = {
  action: "opened",
  number: 7,
  draft: false,
  closed_at: null,
  pull_request: { base: { ref: "main" }, labels: [{ name: "bug" }, { name: "ui" }] },
  tags: ["a", "b"],
};

describe("readPath", () => {
  it("follows nested objects and array indexes", () => {
    expect(readPath(payload, "pull_request.base.ref")).toEqual({ found: true, value: "main" });
    expect(readPath(payload, "pull_request.labels.1.name")).toEqual({ found: true, value: "ui" });
    expect(readPath(payload, "closed_at")).toEqual({ found: true, value: null });
  });

  it("reports missing segments, out-of-range or non-numeric indexes and inherited keys", () => {
    expect(readPath(payload, "pull_request.head.ref")).toEqual({ found: false });
    expect(readPath(payload, "tags.2")).toEqual({ found: false });
    expect(readPath(payload, "tags.first")).toEqual({ found: false });
    expect(readPath(payload, "tags.01")).toEqual({ found: false });
    expect(readPath(payload, "action.length")).toEqual({ found: false });
    expect(readPath(payload, "constructor")).toEqual({ found: false });
    expect(readPath(payload, "__proto__")).toEqual({ found: false });
    expect(readPath(null, "a")).toEqual({ found: false });
  });
});

describe("matchesPayload", () => {
  const m = (entries: Record<string, unknown>) =>
    Object.entries(entries).map(([path, expected]) => ({ path, expected }));

  it("matches every payload with an empty match", () => {
    expect(matchesPayload([], payload)).toBe(true);
    expect(matchesPayload([], null)).toBe(true);
  });

  it("needs every entry to hold", () => {
    expect(matchesPayload(m({ action: "opened", "pull_request.base.ref": "main" }), payload)).toBe(
      true,
    );
    expect(matchesPayload(m({ action: "opened", "pull_request.base.ref": "dev" }), payload)).toBe(
      false,
    );
  });

  it("takes an array as any of its items", () => {
    expect(matchesPayload(m({ action: ["closed", "opened"] }), payload)).toBe(true);
    expect(matchesPayload(m({ action: ["closed", "reopened"] }), payload)).toBe(false);
    expect(matchesPayload(m({ number: [6, 7] }), payload)).toBe(true);
  });

  it("compares types strictly and objects in depth", () => {
    expect(matchesPayload(m({ number: "7" }), payload)).toBe(false);
    expect(matchesPayload(m({ draft: false }), payload)).toBe(true);
    expect(matchesPayload(m({ "pull_request.base": [{ ref: "main" }] }), payload)).toBe(true);
    // An array value of the payload is compared as a whole, inside the any-of list.
    expect(matchesPayload(m({ tags: [["a", "b"]] }), payload)).toBe(true);
    expect(matchesPayload(m({ tags: [["b", "a"]] }), payload)).toBe(false);
    expect(matchesPayload(m({ tags: [{ 0: "a", 1: "b" }] }), payload)).toBe(false);
    expect(matchesPayload(m({ closed_at: [{}] }), payload)).toBe(false);
    expect(matchesPayload(m({ "pull_request.base": [{ ref: "main", extra: 1 }] }), payload)).toBe(
      false,
    );
  });

  it("compares objects whatever the order of their keys, as JSON from the database", () => {
    // The stored match and the posted body both come out of JSON.parse.
    const posted = JSON.parse('{"sender":{"login":"octo","id":1},"labels":[{"name":"bug"}]}');
    const stored = JSON.parse('[{"id":1,"login":"octo"}]') as unknown;
    expect(matchesPayload([{ path: "sender", expected: stored }], posted)).toBe(true);
    expect(
      matchesPayload(
        [{ path: "labels", expected: JSON.parse('[[{"name":"bug"}]]') as unknown }],
        posted,
      ),
    ).toBe(true);
  });

  it("never matches a missing path, not even with null", () => {
    expect(matchesPayload(m({ "pull_request.head.ref": null }), payload)).toBe(false);
    expect(matchesPayload(m({ missing: ["x", null] }), payload)).toBe(false);
    expect(matchesPayload(m({ closed_at: null }), payload)).toBe(true);
  });
});

describe("renderTemplate", () => {
  const vars = { payload, now: "2026-01-02T03:04:05.000Z", date: "2026-01-02" };

  it("replaces dot-paths, with or without spaces inside the braces", () => {
    expect(
      renderTemplate(
        "PR #{{payload.number}} {{ payload.action }} on {{payload.pull_request.base.ref}}",
        vars,
      ),
    ).toBe("PR #7 opened on main");
    expect(renderTemplate("{{date}} at {{now}}", vars)).toBe(
      "2026-01-02 at 2026-01-02T03:04:05.000Z",
    );
  });

  it("inserts objects and arrays as JSON, booleans as text, null and missing paths as nothing", () => {
    expect(renderTemplate("{{payload.tags}}|{{payload.pull_request.base}}", vars)).toBe(
      '["a","b"]|{"ref":"main"}',
    );
    expect(
      renderTemplate("[{{payload.draft}}][{{payload.closed_at}}][{{payload.nope.x}}]", vars),
    ).toBe("[false][][]");
  });

  it("inserts values as text, never as templates or code", () => {
    const hostile = {
      payload: { title: "{{payload.secret}} ${process.env.HOME} `rm -rf /`", secret: "s3cr3t" },
    };
    expect(renderTemplate("Fix: {{payload.title}}", hostile)).toBe(
      "Fix: {{payload.secret}} ${process.env.HOME} `rm -rf /`",
    );
  });

  it("leaves text without placeholders alone and drops malformed paths", () => {
    expect(renderTemplate("no {placeholders} here {{", vars)).toBe("no {placeholders} here {{");
    expect(renderTemplate("[{{payload..action}}]", vars)).toBe("[]");
  });

  it("renders values as text the same way toText does", () => {
    expect(toText(1.5)).toBe("1.5");
    expect(toText(undefined)).toBe("");
    expect(toText({ a: [1] })).toBe('{"a":[1]}');
  });
});

describe("DOT_PATH", () => {
  it("accepts dotted segments and refuses empty segments and whitespace", () => {
    for (const ok of ["a", "a.b.c", "commits.0.id", "x-y_z"]) expect(DOT_PATH.test(ok)).toBe(true);
    for (const bad of ["", ".a", "a.", "a..b", "a b", "{a}"])
      expect(DOT_PATH.test(bad)).toBe(false);
  });
});

describe("verifySignature", () => {
  const body = '{"action":"opened"}';
  const good = `sha256=${createHmac("sha256", "top-secret").update(body).digest("hex")}`;

  it("accepts the HMAC-SHA256 of the raw body with the secret", () => {
    expect(verifySignature("top-secret", body, good)).toBe(true);
  });

  it("refuses a missing header, another secret, another body and a truncated signature", () => {
    expect(verifySignature("top-secret", body, undefined)).toBe(false);
    expect(verifySignature("other-secret", body, good)).toBe(false);
    expect(verifySignature("top-secret", '{"action":"closed"}', good)).toBe(false);
    expect(verifySignature("top-secret", body, good.slice(0, -2))).toBe(false);
    expect(verifySignature("top-secret", body, good.replace("sha256=", "sha1="))).toBe(false);
  });
});

describe("globMatches", () => {
  it("matches everything without a pattern", () => {
    expect(globMatches(undefined, "anything")).toBe(true);
    expect(globMatches(null, "feature/x")).toBe(true);
  });

  it("keeps * within a segment and lets ** cross slashes", () => {
    expect(globMatches("main", "main")).toBe(true);
    expect(globMatches("main", "maint")).toBe(false);
    expect(globMatches("release/*", "release/1.2")).toBe(true);
    expect(globMatches("release/*", "release/1.2/hotfix")).toBe(false);
    expect(globMatches("**", "feature/a/b")).toBe(true);
    expect(globMatches("{main,develop}", "develop")).toBe(true);
    expect(globMatches("CI*", "CI / test")).toBe(false);
  });

  it("lets * match any characters in free text such as workflow names", () => {
    expect(globMatches("CI*", "CI / test", { anyChars: true })).toBe(true);
    expect(globMatches("*deploy*", "Build and deploy (prod)", { anyChars: true })).toBe(true);
    expect(globMatches("CI*", "Lint", { anyChars: true })).toBe(false);
  });
});
