import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, configSecrets, loadConfig } from "../../src/config/env.js";
import { testPrivateKey } from "../helpers/github.js";

describe("configuration", () => {
  it("has the documented defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: "127.0.0.1",
      mongodbUri: undefined,
      runWorkers: true,
      openSignup: true,
      github: undefined,
      pipeline: {
        parallelThreshold: 6,
        maxParallelWorkers: 3,
        maxFixAttempts: 3,
        taskConcurrency: 4,
        commandTimeoutS: 600,
      },
    });
    expect(config.dataDir.endsWith(".data")).toBe(true);
    expect(Object.isFrozen(config.pipeline)).toBe(true);
  });

  it("lists every problem at once", () => {
    try {
      loadConfig({ PORT: "99999", RUN_WORKERS: "perhaps", TASK_CONCURRENCY: "0" });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems.join("\n");
      expect(problems).toContain("PORT");
      expect(problems).toContain("RUN_WORKERS");
      expect(problems).toContain("TASK_CONCURRENCY");
    }
  });

  it("infers the model provider from the key that is set", () => {
    expect(loadConfig({ ANTHROPIC_API_KEY: "sk-ant-xxxxxxxx" }).llm).toMatchObject({
      provider: "anthropic",
      apiKey: "sk-ant-xxxxxxxx",
    });
    expect(loadConfig({ OPENAI_API_KEY: "sk-xxxxxxxxxx" }).llm).toMatchObject({
      provider: "openai",
    });
    expect(loadConfig({ LLM_BASE_URL: "http://127.0.0.1:11434/v1" }).llm.provider).toBe(
      "openai-compatible",
    );
    expect(() => loadConfig({ LLM_PROVIDER: "openai-compatible" })).toThrow(/LLM_BASE_URL/);
  });

  it("requires the App's key and secret when APP_ID is set, and moves endpoints for GHES", () => {
    expect(() => loadConfig({ APP_ID: "1" })).toThrow(/PRIVATE_KEY.*\n.*WEBHOOK_SECRET/s);
    const ghes = loadConfig({
      APP_ID: "1",
      PRIVATE_KEY: testPrivateKey(),
      WEBHOOK_SECRET: "s3cret!",
      GHE_HOST: "ghe.example.com",
    });
    expect(ghes.github).toMatchObject({
      baseUrl: "https://ghe.example.com/api/v3",
      webUrl: "https://ghe.example.com",
    });
  });

  it("knows which values are secrets", () => {
    const config = loadConfig({
      LLM_API_KEY: "llm-secret-123",
      MONGODB_URI: "mongodb://u:db-pass-456@h/x",
      SLACK_CLIENT_SECRET: "slack-client-secret-789",
    });
    expect(configSecrets(config)).toEqual(
      expect.arrayContaining(["llm-secret-123", "db-pass-456", "slack-client-secret-789"]),
    );
  });

  it("takes PRIVATE_KEY as PEM, \\n-escaped PEM or base64, or PRIVATE_KEY_PATH, and refuses junk at start", async () => {
    const pem = testPrivateKey();
    const app = { APP_ID: "1", WEBHOOK_SECRET: "s3cret!" };
    const forms = [pem, pem.replace(/\n/g, "\\n"), Buffer.from(pem).toString("base64")];
    for (const form of forms) {
      expect(loadConfig({ ...app, PRIVATE_KEY: form }).github?.privateKey.trim()).toBe(pem.trim());
    }
    const dir = await mkdtemp(path.join(os.tmpdir(), "foreman-key-"));
    try {
      const file = path.join(dir, "app.pem");
      await writeFile(file, pem);
      expect(loadConfig({ ...app, PRIVATE_KEY_PATH: file }).github?.privateKey).toBe(pem);
      expect(() => loadConfig({ ...app, PRIVATE_KEY_PATH: path.join(dir, "missing.pem") })).toThrow(
        /PRIVATE_KEY_PATH: cannot read .*missing\.pem \(ENOENT\)/,
      );
      await writeFile(file, "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n");
      expect(() => loadConfig({ ...app, PRIVATE_KEY_PATH: file })).toThrow(
        /PRIVATE_KEY_PATH: the key does not parse/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // Not a PEM at all, and a PEM whose body is junk: both stop the start, naming the variable.
    expect(() => loadConfig({ ...app, PRIVATE_KEY: "not-a-key" })).toThrow(
      /PRIVATE_KEY: not a PEM private key/,
    );
    const junk = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----";
    let message = "";
    try {
      loadConfig({ ...app, PRIVATE_KEY: junk });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/PRIVATE_KEY: the key does not parse/);
    expect(message).not.toContain("AAAA");
  });

  it("exposes metrics only when the operator says how: token, separate port or public", () => {
    expect(loadConfig({}).metrics).toMatchObject({ enabled: false, publicPort: "absent" });
    expect(loadConfig({ METRICS_TOKEN: "t".repeat(16) }).metrics).toMatchObject({
      enabled: true,
      publicPort: "token",
      port: undefined,
    });
    expect(loadConfig({ METRICS_PORT: "9464" }).metrics).toMatchObject({
      enabled: true,
      publicPort: "absent",
      port: 9464,
      host: "127.0.0.1",
    });
    expect(loadConfig({ METRICS: "public" }).metrics).toMatchObject({
      enabled: true,
      publicPort: "open",
    });
    expect(
      loadConfig({ METRICS: "off", METRICS_TOKEN: "t".repeat(16), METRICS_PORT: "9464" }).metrics,
    ).toMatchObject({ enabled: false, publicPort: "absent", port: undefined });
    expect(() => loadConfig({ METRICS: "token" })).toThrow(/METRICS_TOKEN: required/);
    expect(() => loadConfig({ METRICS_TOKEN: "short" })).toThrow(/METRICS_TOKEN: .*16/);
    expect(configSecrets(loadConfig({ METRICS_TOKEN: "metrics-secret-0123" }))).toContain(
      "metrics-secret-0123",
    );
  });
});
