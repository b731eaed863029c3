import { describe, expect, it } from "vitest";
import { isLoopbackHost, loadConfig } from "../../src/config/env.js";

describe("OPEN_SIGNUP's default follows HOST", () => {
  it("is on for loopback listen addresses only", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"])
      expect([host, isLoopbackHost(host)]).toEqual([host, true]);
    for (const host of [
      "0.0.0.0",
      "::",
      "192.168.1.5",
      "10.0.0.1",
      "foreman.example.com",
      "::ffff:10.0.0.1",
    ])
      expect([host, isLoopbackHost(host)]).toEqual([host, false]);
    expect(loadConfig({}).openSignup).toBe(true);
    expect(loadConfig({ HOST: "0.0.0.0" })).toMatchObject({
      openSignup: false,
      openSignupWhy: "OPEN_SIGNUP unset and HOST is not a loopback address",
    });
    expect(loadConfig({ HOST: "::" }).openSignup).toBe(false);
  });

  it("is what OPEN_SIGNUP says when set, whatever HOST", () => {
    expect(loadConfig({ HOST: "0.0.0.0", OPEN_SIGNUP: "true" })).toMatchObject({
      openSignup: true,
      openSignupWhy: "OPEN_SIGNUP=true",
    });
    expect(loadConfig({ HOST: "127.0.0.1", OPEN_SIGNUP: "off" }).openSignup).toBe(false);
    expect(loadConfig({ HOST: "0.0.0.0", OPEN_SIGNUP: "" }).openSignup).toBe(false);
    expect(() => loadConfig({ OPEN_SIGNUP: "maybe" })).toThrow(/OPEN_SIGNUP/);
  });

  it("lets SANDBOX=none through where sign-up is closed by default", () => {
    expect(() => loadConfig({ SANDBOX: "none" })).toThrow(/refused while OPEN_SIGNUP is on/);
    expect(loadConfig({ SANDBOX: "none", HOST: "0.0.0.0" }).sandbox.engine).toBe("none");
    expect(() => loadConfig({ SANDBOX: "none", HOST: "0.0.0.0", OPEN_SIGNUP: "1" })).toThrow(
      /refused while OPEN_SIGNUP is on/,
    );
  });
});
