import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/util/logger.js";
import { forgetSecret, redactDeep, redactText, registerSecret } from "../../src/util/redact.js";

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
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ level: "info", destination: sink });
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
