import { describe, expect, it } from "vitest";
import { ConfigError, configSecrets, loadConfig } from "../../src/config/env.js";

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
      PRIVATE_KEY: "pem",
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
    });
    expect(configSecrets(config)).toEqual(
      expect.arrayContaining(["llm-secret-123", "db-pass-456"]),
    );
  });
});
