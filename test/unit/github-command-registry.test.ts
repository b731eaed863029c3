import { describe, expect, expectTypeOf, it } from "vitest";
import { COMMAND_NAMES, type CommandName } from "../../src/github/command-parser.js";
import { COMMANDS, type CommandHandler, type CommandRegistry } from "../../src/github/commands.js";

/*
 * The comment commands are one registry keyed by the parser's command names. The type checks
 * below are enforced by `tsc --noEmit` (this file is part of the project): a `@ts-expect-error`
 * that no longer has an error to expect fails the type check.
 */

const handler: CommandHandler = { linked: false, run: () => Promise.resolve(null) };

describe("the comment command registry", () => {
  it("has one handler for every command the parser knows, and no other", () => {
    expectTypeOf<keyof typeof COMMANDS>().toEqualTypeOf<CommandName>();
    expect(Object.keys(COMMANDS).sort()).toEqual([...COMMAND_NAMES].sort());
  });

  it("does not compile with a command's handler left out", () => {
    // @ts-expect-error -- "help" is a command of the parser without a handler
    const _missing: CommandRegistry = {
      task: handler,
      agent: handler,
      review: handler,
      describe: handler,
      ask: handler,
      improve: handler,
      approve: handler,
      reject: handler,
      "approve-diff": handler,
      "reject-diff": handler,
      status: handler,
    };
    expect(_missing).toBeDefined();
  });

  it("does not compile with a handler for a command the parser does not know", () => {
    const _extra: CommandRegistry = {
      ...COMMANDS,
      // @ts-expect-error -- "deploy" is not in COMMAND_NAMES
      deploy: handler,
    };
    expect(_extra).toBeDefined();
  });

  it("does not compile with a handler that is not one", () => {
    const _wrong: CommandRegistry = {
      ...COMMANDS,
      // @ts-expect-error -- a handler answers a context, it is not a reply text
      help: "Commands: ...",
    };
    expect(_wrong).toBeDefined();
  });
});
