import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/util/logger.js";
import {
  forgetSecret,
  redactDeep,
  redactText,
  redactTextIn,
  registerSecret,
  SecretScope,
  secretForms,
  withSecretScope,
} from "../../src/util/redact.js";

/** An info-level logger whose every written line is kept in `lines`. */
function capturedLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger({ level: "info", destination: sink }), lines };
}

describe("redaction", () => {
  it("scrubs credential formats and registered values", () => {
    const text = [
      "key fmn_QRoZ-FENMdsL9dBS4nPYmgWLVALL5hEHVhemszJxXEs",
      "token ghs_16C7e42F292c6912E7710c838347Ae178B4a",
      "anthropic sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
      "remote https://x-access-token:abc123def@github.com/o/r.git",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
      "custom my-very-own-secret",
    ].join("\n");
    registerSecret("my-very-own-secret");
    const out = redactText(text);
    forgetSecret("my-very-own-secret");
    for (const leaked of [
      "QRoZ-FENMd",
      "16C7e42F",
      "api03-abcdef",
      "abc123def",
      "MIIE",
      "my-very-own-secret",
    ]) {
      expect(out).not.toContain(leaked);
    }
    expect(out).toContain("https://x-access-token:[REDACTED]@github.com/o/r.git");
  });

  it("blanks secret-named fields in objects", () => {
    expect(
      redactDeep({
        headers: { "x-api-key": "whatever", accept: "json" },
        nested: [{ password: "p" }],
      }),
    ).toEqual({
      headers: { "x-api-key": "[REDACTED]", accept: "json" },
      nested: [{ password: "[REDACTED]" }],
    });
  });

  it("applies to every log line without the caller asking", () => {
    const { logger, lines } = capturedLogger();
    logger.info(
      { req: { headers: { "x-api-key": "fmn_QRoZ-FENMdsL9dBS4nPYmgWLVALL5hEHVhemszJxXEs" } } },
      "request",
    );
    logger.info("token is ghs_16C7e42F292c6912E7710c838347Ae178B4a");
    logger.error({ err: new Error("clone of https://u:pa55word@h/r failed") }, "failed");
    const all = lines.join("");
    expect(all).not.toContain("QRoZ");
    expect(all).not.toContain("16C7e42F");
    expect(all).not.toContain("pa55word");
    expect(lines).toHaveLength(3);
  });
});

describe("redaction scoped to one account's task", () => {
  /** Resolves when both flows reached it: forces the two scopes' work to interleave. */
  function barrier(parties: number) {
    let arrived = 0;
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    return async () => {
      arrived += 1;
      if (arrived === parties) open();
      await opened;
    };
  }

  it("applies an account's values only inside its own scope, also while two scopes interleave", async () => {
    const a = new SecretScope("account-a", ["export function", "PLANNING"]);
    const b = new SecretScope("account-b", ["b-own-secret-value"]);
    const text = "PLANNING: export function add(a, b) { b-own-secret-value }";
    const meet = barrier(2);
    const seen: { a: string[]; b: string[] } = { a: [], b: [] };
    await Promise.all([
      withSecretScope(a, async () => {
        seen.a.push(redactText(text));
        await meet();
        seen.a.push(redactText(text));
      }),
      withSecretScope(b, async () => {
        seen.b.push(redactText(text));
        await meet();
        await Promise.resolve();
        seen.b.push(redactText(text));
      }),
    ]);
    for (const out of seen.a)
      expect(out).toBe("[REDACTED]: [REDACTED] add(a, b) { b-own-secret-value }");
    for (const out of seen.b)
      expect(out).toBe("PLANNING: export function add(a, b) { [REDACTED] }");
    // Outside both: nothing of either, and nothing was learned process-wide.
    expect(redactText(text)).toBe(text);
    expect(redactDeep({ message: text })).toEqual({ message: text });
  });

  it("keeps the operator's values process-wide, in every scope and outside", async () => {
    registerSecret("operator-config-secret");
    try {
      const inside = await withSecretScope(new SecretScope("a", ["account-a-secret"]), async () => {
        await Promise.resolve();
        return redactText("operator-config-secret account-a-secret");
      });
      expect(inside).toBe("[REDACTED] [REDACTED]");
      expect(redactText("operator-config-secret account-a-secret")).toBe(
        "[REDACTED] account-a-secret",
      );
    } finally {
      forgetSecret("operator-config-secret");
    }
  });

  it("redacts explicitly for a task's text made outside its flow", () => {
    const scope = new SecretScope("a", ["tracker-token-1234"]);
    expect(redactTextIn(scope, "token tracker-token-1234")).toBe("token [REDACTED]");
    expect(redactTextIn(undefined, "token tracker-token-1234")).toBe("token tracker-token-1234");
  });

  it("redacts a scope's values in log lines written inside it", () => {
    const { logger, lines } = capturedLogger();
    withSecretScope(new SecretScope("a", ["scoped-log-secret"]), () => {
      logger.info({ detail: "has scoped-log-secret" }, "with scoped-log-secret");
      logger.error({ err: new Error("failed: scoped-log-secret") }, "failed");
    });
    logger.info("outside: scoped-log-secret");
    expect(lines[0]).not.toContain("scoped-log-secret");
    expect(lines[1]).not.toContain("scoped-log-secret");
    expect(lines[2]).toContain("outside: scoped-log-secret");
  });

  it("redacts the forms the service could turn a value into", () => {
    const value = "Tr4cker/Token+Value?é";
    const scope = new SecretScope("a", [value]);
    const bytes = Buffer.from(value, "utf8");
    const b64 = (b: Buffer) => b.toString("base64");
    const url = (b: Buffer) => b.toString("base64url");
    const forms = [
      value,
      b64(bytes),
      url(bytes),
      bytes.toString("hex"),
      bytes.toString("hex").toUpperCase(),
      encodeURIComponent(value),
      encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
      new URLSearchParams({ q: value }).toString(),
      Array.from(value).reverse().join(""),
      JSON.stringify({ v: value }),
    ];
    for (const form of forms) {
      const out = redactTextIn(scope, `before ${form} after`);
      expect(out, form).toContain("[REDACTED]");
      expect(out, form).not.toContain(form);
    }
    // Inside a longer base64 text, at each byte offset: what encodes the value alone goes.
    for (const prefix of ["", "x", "xy", "xyz", "user:"]) {
      for (const encode of [b64, url]) {
        const encoded = encode(Buffer.from(`${prefix}${value}!trailing`));
        const out = redactTextIn(scope, encoded);
        expect(out, `${prefix} ${encoded}`).toContain("[REDACTED]");
        // At most one character on each side still carries a few bits of the value.
        expect(out.replace("[REDACTED]", "").length, encoded).toBeLessThanOrEqual(
          encode(Buffer.from(`${prefix}!trailing`)).length + 3,
        );
      }
    }
  });

  it("hides the whole of overlapping values, the scope's and the operator's", () => {
    registerSecret("operator-abc-123456");
    try {
      const scope = new SecretScope("a", ["123456-account-xyz"]);
      expect(redactTextIn(scope, "[operator-abc-123456-account-xyz]")).toBe("[[REDACTED]]");
      expect(redactTextIn(scope, "123456-account-xyzoperator-abc-123456!")).toBe("[REDACTED]!");
    } finally {
      forgetSecret("operator-abc-123456");
    }
  });

  it("finds every value among many in long texts", () => {
    const values = Array.from({ length: 300 }, (_, i) => `value-${i}-${(i * 7919).toString(36)}x`);
    const scope = new SecretScope("a", values);
    const words = Array.from({ length: 2000 }, (_, i) =>
      i % 7 === 0 ? values[(i * 13) % values.length]! : `word${i}`,
    );
    const out = redactTextIn(scope, words.join(" "));
    for (const value of values) expect(out).not.toContain(value);
    expect(out).toContain("word1 word2");
    expect(out.split("[REDACTED]")).toHaveLength(Math.ceil(2000 / 7) + 1);
  });

  it("leaves short values and ordinary text alone", () => {
    const scope = new SecretScope("a", ["abc", "12345"]);
    expect(scope.size).toBe(0);
    expect(secretForms("PLANNING")).toContain("GNINNALP");
    expect(redactTextIn(scope, "abc 12345")).toBe("abc 12345");
  });
});
