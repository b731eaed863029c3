#!/usr/bin/env node
import { realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import dotenv from "dotenv";
import { ConfigError, loadConfig, registerConfigSecrets, type Config } from "../config/env.js";
import { runningServer } from "../db/embedded.js";
import { connectDatabase, withDatabaseName, type Database } from "../db/connection.js";
import type { Models, Tier } from "../db/models.js";
import {
  getAccount,
  isTier,
  listAccounts,
  revokeAnyKey,
  setTier,
} from "../domain/accounts/accounts.js";
import { createAccountWithKey, type KeyListing } from "../domain/accounts/keys.js";
import { isAppError } from "../errors.js";
import { createLogger, type Logger } from "../util/logger.js";
import { redactText } from "../util/redact.js";

/*
 * Operator command-line tool (tiers are set here, never over HTTP: README.md, "Operator CLI").
 *   npm run admin -- <command>            (after npm run build)
 *   npx tsx src/cli/admin.ts <command>    (development)
 * Exit codes: 0 done, 1 failure (unknown account or key, database unreachable), 2 usage.
 */

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

const PROGRAM = "foreman-admin";

export const USAGE = `Usage: ${PROGRAM} <command> [--json]

Commands:
  accounts list                          all accounts: tier, created_at, tasks this month, active keys
  accounts create [<key_name>]           a new account (free tier) and its first key, shown once:
                                         the way in while open sign-up is off (OPEN_SIGNUP)
  accounts show <account_id>             one account and its keys
  accounts set-tier <account_id> <tier>  set the tier: free (10 tasks a month) or pro (unlimited)
  keys list <account_id>                 the keys of an account
  keys revoke <key_id>                   revoke any key, whatever its account

Options:
  --json       machine-readable output: one JSON object per line
  -h, --help   show this help

Database: MONGODB_URI when set. Otherwise the embedded server under DATA_DIR: the one the
running service started (found through DATA_DIR/db/running.json), else a new one.

Exit codes: 0 done, 1 failure (unknown account or key, database unreachable), 2 usage error.`;

/** Where the CLI writes its output and which environment it reads. */
export interface AdminIo {
  out(line: string): void;
  err(line: string): void;
  env: NodeJS.ProcessEnv;
}

type Command =
  | { kind: "help" }
  | { kind: "accounts-list" }
  | { kind: "accounts-create"; keyName: string }
  | { kind: "accounts-show"; accountId: string }
  | { kind: "accounts-set-tier"; accountId: string; tier: Tier }
  | { kind: "keys-list"; accountId: string }
  | { kind: "keys-revoke"; keyId: string };

interface Invocation {
  command: Command;
  json: boolean;
}

class UsageError extends Error {}

/** A failure with a message meant for the operator (exit 1). */
class Failure extends Error {}

function isParseArgsError(error: unknown): error is Error {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
}

function expectArgs(args: string[], names: string[], usage: string): string[] {
  if (args.length !== names.length) {
    const problem =
      args.length < names.length
        ? `missing ${names.slice(args.length).join(" and ")}`
        : "too many arguments";
    throw new UsageError(`${problem}; usage: ${PROGRAM} ${usage}`);
  }
  for (const [i, value] of args.entries()) {
    if (value.trim() === "") throw new UsageError(`${names[i]} must not be empty`);
  }
  return args;
}

function parseInvocation(argv: string[]): Invocation {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  const json = values.json === true;
  const [group, action, ...rest] = positionals;
  if (values.help || group === "help") return { command: { kind: "help" }, json };
  if (group === undefined) throw new UsageError("no command given");

  if (group === "accounts") {
    switch (action) {
      case "list":
        expectArgs(rest, [], "accounts list");
        return { command: { kind: "accounts-list" }, json };
      case "create": {
        if (rest.length > 1)
          throw new UsageError(
            "too many arguments; usage: foreman-admin accounts create [<key_name>]",
          );
        const keyName = (rest[0] ?? "admin").trim();
        if (keyName === "" || keyName.length > 100)
          throw new UsageError("<key_name> must be 1 to 100 characters");
        return { command: { kind: "accounts-create", keyName }, json };
      }
      case "show": {
        const [accountId] = expectArgs(rest, ["<account_id>"], "accounts show <account_id>");
        return { command: { kind: "accounts-show", accountId: accountId! }, json };
      }
      case "set-tier": {
        const usage = "accounts set-tier <account_id> <free|pro>";
        const [accountId, tier] = expectArgs(rest, ["<account_id>", "<tier>"], usage);
        if (!isTier(tier!)) throw new UsageError(`invalid tier "${tier}"; use free or pro`);
        return { command: { kind: "accounts-set-tier", accountId: accountId!, tier: tier! }, json };
      }
      default:
        throw new UsageError(
          action === undefined
            ? "accounts needs a command: list, create, show or set-tier"
            : `unknown command "accounts ${action}"`,
        );
    }
  }
  if (group === "keys") {
    switch (action) {
      case "list": {
        const [accountId] = expectArgs(rest, ["<account_id>"], "keys list <account_id>");
        return { command: { kind: "keys-list", accountId: accountId! }, json };
      }
      case "revoke": {
        const [keyId] = expectArgs(rest, ["<key_id>"], "keys revoke <key_id>");
        return { command: { kind: "keys-revoke", keyId: keyId! }, json };
      }
      default:
        throw new UsageError(
          action === undefined
            ? "keys needs a command: list or revoke"
            : `unknown command "keys ${action}"`,
        );
    }
  }
  throw new UsageError(`unknown command "${group}"`);
}

/* ---------- finding the database ---------- */

/** The contents of `<DATA_DIR>/db/running.json`, written by the embedded launcher. */
/**
 * The connection string of the embedded server the running service started on `dataDir`, or
 * undefined when `<dataDir>/db/running.json` is missing, malformed or stale (its process gone
 * or its port closed).
 */
export async function findRunningDatabase(dataDir: string): Promise<string | undefined> {
  return (await runningServer(path.join(dataDir, "db")))?.uri;
}

/**
 * MONGODB_URI when set; else the embedded server of the running service on DATA_DIR; else a
 * new embedded server (only safe when no service uses DATA_DIR, which the check above rules out).
 */
async function openDatabase(config: Config, logger: Logger): Promise<Database> {
  let mongodbUri = config.mongodbUri;
  if (!mongodbUri) {
    const running = await findRunningDatabase(config.dataDir);
    if (running) mongodbUri = withDatabaseName(running, "foreman");
  }
  return connectDatabase(
    { mongodbUri, dataDir: config.dataDir, dbEngine: config.dbEngine },
    logger,
  );
}

/* ---------- output ---------- */

/** Strips control characters so that stored names cannot drive the operator's terminal. */
function printable(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");
}

function table(headers: string[], rows: string[][]): string[] {
  const cells = [headers, ...rows.map((r) => r.map(printable))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells.map((r) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

function limitText(limit: number | null): string {
  return limit === null ? "unlimited" : String(limit);
}

function keyRows(keys: KeyListing[]): string[] {
  if (keys.length === 0) return ["No keys."];
  return table(
    ["ID", "NAME", "PREFIX", "CREATED_AT", "STATUS"],
    keys.map((k) => [
      k.id,
      k.name,
      k.prefix,
      k.created_at,
      k.revoked_at ? `revoked ${k.revoked_at}` : "active",
    ]),
  );
}

/* ---------- commands ---------- */

async function orFailure<T>(promise: Promise<T>, notFoundMessage: string): Promise<T> {
  try {
    return await promise;
  } catch (error) {
    if (isAppError(error) && error.code === "not_found") throw new Failure(notFoundMessage);
    throw error;
  }
}

const noAccount = (id: string) => `no account with id "${printable(id)}"`;

/** `accounts list`'s table: one account a row. */
function accountRows(accounts: Awaited<ReturnType<typeof listAccounts>>): string[] {
  return table(
    ["ID", "TIER", "CREATED_AT", "TASKS_THIS_MONTH", "MONTHLY_LIMIT", "ACTIVE_KEYS"],
    accounts.map((a) => [
      a.id,
      a.tier,
      a.created_at,
      String(a.tasks_this_month),
      limitText(a.monthly_limit),
      String(a.active_keys),
    ]),
  );
}

/** `accounts show`'s lines: the account's facts, then its keys' table. */
function accountLines(account: Awaited<ReturnType<typeof getAccount>>): string[] {
  return [
    `Account:          ${account.id}`,
    `Tier:             ${account.tier}`,
    `Created at:       ${account.created_at}`,
    `Updated at:       ${account.updated_at}`,
    `Tasks this month: ${account.tasks_this_month} of ${limitText(account.monthly_limit)}`,
    `Active keys:      ${account.active_keys} of ${account.keys.length}`,
    "",
    ...keyRows(account.keys),
  ];
}

async function execute(
  command: Command,
  json: boolean,
  models: Models,
  io: AdminIo,
): Promise<void> {
  const emit = (value: unknown) => io.out(JSON.stringify(value));
  switch (command.kind) {
    case "help":
      io.out(USAGE);
      return;
    case "accounts-list": {
      const accounts = await listAccounts(models);
      if (json) {
        accounts.forEach(emit);
        return;
      }
      if (accounts.length === 0) {
        io.out("No accounts.");
        return;
      }
      accountRows(accounts).forEach((line) => io.out(line));
      return;
    }
    case "accounts-create": {
      const created = await createAccountWithKey(models, command.keyName);
      if (json) {
        emit(created);
        return;
      }
      io.out(`Account:  ${created.account_id} (free tier)`);
      io.out(`Key:      ${created.id} ("${printable(created.name)}")`);
      io.out(`Value:    ${created.key}`);
      io.out("The value is shown only now: send it as X-API-Key.");
      return;
    }
    case "accounts-show": {
      const account = await orFailure(
        getAccount(models, command.accountId),
        noAccount(command.accountId),
      );
      if (json) {
        emit(account);
        return;
      }
      accountLines(account).forEach((line) => io.out(line));
      return;
    }
    case "accounts-set-tier": {
      const change = await orFailure(
        setTier(models, command.accountId, command.tier),
        noAccount(command.accountId),
      );
      if (json) {
        emit(change);
        return;
      }
      io.out(
        change.previous_tier === change.tier
          ? `Account ${change.id} is already on the ${change.tier} tier (monthly limit: ${limitText(change.monthly_limit)}).`
          : `Account ${change.id}: tier ${change.previous_tier} -> ${change.tier} (monthly limit: ${limitText(change.monthly_limit)}).`,
      );
      return;
    }
    case "keys-list": {
      const account = await orFailure(
        getAccount(models, command.accountId),
        noAccount(command.accountId),
      );
      if (json) {
        account.keys.forEach((k) => emit({ ...k, account_id: account.id }));
        return;
      }
      keyRows(account.keys).forEach((line) => io.out(line));
      return;
    }
    case "keys-revoke": {
      const key = await orFailure(
        revokeAnyKey(models, command.keyId),
        `no key with id "${printable(command.keyId)}"`,
      );
      if (json) {
        emit(key);
        return;
      }
      io.out(
        key.already_revoked
          ? `Key ${key.id} ("${printable(key.name)}") of account ${key.account_id} was already revoked at ${key.revoked_at}.`
          : `Revoked key ${key.id} ("${printable(key.name)}") of account ${key.account_id}.`,
      );
      return;
    }
  }
}

function defaultIo(): AdminIo {
  return {
    out: (line) => console.log(line),
    err: (line) => console.error(line),
    env: process.env,
  };
}

/**
 * Runs one CLI invocation (`argv` without node and the script) and resolves to its exit code;
 * the entry point below and the tests call it. Never exits the process itself.
 */
export async function runAdmin(argv: string[], io: AdminIo = defaultIo()): Promise<number> {
  let invocation: Invocation;
  try {
    invocation = parseInvocation(argv);
  } catch (error) {
    if (error instanceof UsageError || isParseArgsError(error)) {
      io.err(`${PROGRAM}: ${error.message}`);
      io.err(`Run "${PROGRAM} --help" for the commands.`);
      return EXIT_USAGE;
    }
    throw error;
  }
  if (invocation.command.kind === "help") {
    io.out(USAGE);
    return EXIT_OK;
  }

  let config: Config;
  try {
    config = loadConfig(io.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(error.message);
      return EXIT_USAGE;
    }
    throw error;
  }
  registerConfigSecrets(config);
  // Logs go to stderr so that stdout carries only the command's output.
  const logger = createLogger({ level: "warn", destination: process.stderr });

  let db: Database;
  try {
    db = await openDatabase(config, logger);
  } catch (error) {
    io.err(
      `${PROGRAM}: cannot open the database: ${redactText(String((error as Error)?.message ?? error))}`,
    );
    return EXIT_FAILURE;
  }
  try {
    await execute(invocation.command, invocation.json, db.models, io);
    return EXIT_OK;
  } catch (error) {
    const message =
      error instanceof Failure ? error.message : String((error as Error)?.message ?? error);
    io.err(`${PROGRAM}: ${redactText(message)}`);
    return EXIT_FAILURE;
  } finally {
    await db
      .close()
      .catch((error: unknown) => logger.warn({ err: error }, "closing the database failed"));
  }
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  // The service's `.env`, so the CLI finds the same database (set variables win).
  dotenv.config({ path: process.env.ENV_FILE || ".env", quiet: true });
  runAdmin(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
      // Everything is closed by now; this only guards against a stray handle keeping us alive.
      setTimeout(() => process.exit(code), 5000).unref();
    },
    (error: unknown) => {
      console.error(
        `${PROGRAM}: ${redactText(error instanceof Error ? (error.stack ?? error.message) : String(error))}`,
      );
      process.exit(EXIT_FAILURE);
    },
  );
}
