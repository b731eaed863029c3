import mongoose from "mongoose";
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdtemp, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TASK_REQUEST_JOB } from "../../src/integrations/task-request.js";
import { IntakeJournal, JOURNAL_DIR, type EnqueueFn } from "../../src/queue/intake-journal.js";
import { createScheduler, type Scheduler } from "../../src/queue/scheduler.js";
import { createLogger } from "../../src/util/logger.js";
import { until } from "../helpers/github-fake.js";
import { WRITER_KIND } from "../helpers/journal-writer.js";
import { startTestServer, testDatabaseUri } from "../helpers/server.js";

/*
 * The intake journal (src/queue/intake-journal.ts) on the real database and real files: what
 * a door answered after appending reaches the jobs collection once, and what a crashed or
 * stopped writer left is inserted by the next process of its DATA_DIR.
 */

const logger = createLogger({ level: "silent" });
const WRITER = path.resolve(import.meta.dirname, "../helpers/journal-writer.ts");
let connection: mongoose.Connection;
let scheduler: Scheduler;
const open: IntakeJournal[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  connection = await mongoose.createConnection(testDatabaseUri("journal")).asPromise();
  scheduler = await createScheduler({
    db: connection.db!,
    logger,
    name: "journal-test",
    concurrency: 1,
    lockLifetimeMs: 60_000,
  });
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((j) => j.close(0)));
});
afterAll(async () => {
  await connection.close();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

const jobs = () => connection.db!.collection("jobs");
const jobsOf = async (ns: number[]) =>
  (
    await jobs()
      .find({ name: WRITER_KIND.name, "data.n": { $in: ns } })
      .toArray()
  )
    .map((j) => (j.data as { n: number }).n)
    .sort((a, b) => a - b);

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "foreman-journal-"));
  dirs.push(dir);
  return dir;
}

async function openJournal(dir: string, enqueue?: EnqueueFn, heartbeatMs?: number) {
  const journal = await IntakeJournal.open({
    dataDir: dir,
    kinds: [WRITER_KIND],
    enqueue: enqueue ?? ((kind, data, options) => scheduler.enqueue(kind, data, options)),
    logger,
    ...(heartbeatMs ? { heartbeatMs } : {}),
  });
  open.push(journal);
  return journal;
}

async function journalLines(dir: string): Promise<string[]> {
  const folder = path.join(dir, JOURNAL_DIR);
  const lines: string[] = [];
  for (const name of await readdir(folder))
    lines.push(...(await readFile(path.join(folder, name), "utf8")).split("\n").filter(Boolean));
  return lines;
}

const enqueueOf = (n: number) => [WRITER_KIND, { n }, { unique: { "data.n": n } }] as const;

describe("intake journal", () => {
  it("answers once the line is written, inserts the job once, and empties its file", async () => {
    const dir = await dataDir();
    // The inserts wait for `release`, so the file is read before any of them.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const journal = await openJournal(dir, async (kind, data, options) => {
      await held;
      return scheduler.enqueue(kind, data, options);
    });
    expect(await journal.enqueue(...enqueueOf(101))).toBe(true);
    // Durable before any insert: the line is in the file.
    expect((await journalLines(dir)).map((l) => JSON.parse(l).data)).toEqual([{ n: 101 }]);
    expect(await jobsOf([101])).toEqual([]);
    // A redelivery to this process is known at once.
    expect(await journal.enqueue(...enqueueOf(101))).toBe(false);
    release();
    expect(await journal.flush(10_000)).toBe(true);
    expect(await jobsOf([101])).toEqual([101]);
    expect(await journalLines(dir)).toEqual([]);
    // A burst goes in as well, each once.
    const burst = Array.from({ length: 50 }, (_, i) => 200 + i);
    expect(await Promise.all(burst.map((n) => journal.enqueue(...enqueueOf(n))))).toEqual(
      burst.map(() => true),
    );
    expect(await journal.flush(10_000)).toBe(true);
    expect(await jobsOf(burst)).toEqual(burst);
  });

  it("refuses data its job's schema refuses, before writing anything", async () => {
    const dir = await dataDir();
    const journal = await openJournal(dir);
    await expect(journal.enqueue(WRITER_KIND, { n: "one" } as never)).rejects.toThrow();
    expect(await journalLines(dir)).toEqual([]);
  });

  it("keeps lines the database refuses and inserts them with backoff once it answers", async () => {
    const dir = await dataDir();
    let refusals = 0;
    const journal = await openJournal(dir, async (kind, data, options) => {
      if (refusals < 3) {
        refusals += 1;
        throw new Error("connection refused");
      }
      return scheduler.enqueue(kind, data, options);
    });
    await journal.enqueue(...enqueueOf(301));
    await journal.enqueue(...enqueueOf(302));
    expect(await journal.flush(20_000)).toBe(true);
    expect(refusals).toBe(3);
    expect(await jobsOf([301, 302])).toEqual([301, 302]);
  });

  it("inserts what a killed writer journaled when the next process of its DATA_DIR opens", async () => {
    const dir = await dataDir();
    const child = spawn(process.execPath, ["--import", "tsx", WRITER, dir, "3"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("journaled")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`the writer exited with ${code}`)));
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(await journalLines(dir)).toHaveLength(3);
    const next = await openJournal(dir);
    expect(await next.flush(10_000)).toBe(true);
    // The lines are the writer's n = 0, 1, 2; and its file is gone.
    expect(await jobsOf([0, 1, 2])).toEqual([0, 1, 2]);
    expect(await readdir(path.join(dir, JOURNAL_DIR))).toEqual([]);
  }, 60_000);

  it("leaves what it could not insert at close in its file, for the next start", async () => {
    const dir = await dataDir();
    const stuck = await openJournal(dir, () => new Promise<boolean>(() => {}));
    await stuck.enqueue(...enqueueOf(401));
    await stuck.close(50);
    expect(await journalLines(dir)).toHaveLength(1);
    const next = await openJournal(dir);
    expect(await next.flush(10_000)).toBe(true);
    expect(await jobsOf([401])).toEqual([401]);
    // Inserted before is no second job: a replay of the same line changes nothing.
    const line = JSON.stringify({
      name: WRITER_KIND.name,
      data: { n: 401 },
      unique: { "data.n": 401 },
    });
    await writeFile(
      path.join(dir, JOURNAL_DIR, `${hostname()}~999999999~dead~0.jsonl`),
      `${line}\n{"cut sh`,
    );
    expect(await next.takeOverDead()).toBe(1);
    expect(await next.flush(10_000)).toBe(true);
    expect(await jobs().countDocuments({ name: WRITER_KIND.name, "data.n": 401 })).toBe(1);
  });

  it("takes a file of another host only once it is stale", async () => {
    const dir = await dataDir();
    const journal = await openJournal(dir);
    const folder = path.join(dir, JOURNAL_DIR);
    const line = (n: number) =>
      `${JSON.stringify({ name: WRITER_KIND.name, data: { n }, unique: { "data.n": n } })}\n`;
    const fresh = path.join(folder, "elsewhere~42~abcd1234~0.jsonl");
    const stale = path.join(folder, "elsewhere~43~abcd1234~0.jsonl");
    await writeFile(fresh, line(501));
    await writeFile(stale, line(502));
    const old = new Date(Date.now() - 5 * 60_000);
    await utimes(stale, old, old);
    expect(await journal.takeOverDead()).toBe(1);
    expect(await journal.flush(10_000)).toBe(true);
    expect(await jobsOf([501, 502])).toEqual([502]);
    expect((await stat(fresh)).isFile()).toBe(true);
  });

  it("writes its lines again when another process took its file while it was paused", async () => {
    const dir = await dataDir();
    const journal = await openJournal(dir, () => new Promise<boolean>(() => {}), 50);
    await journal.enqueue(...enqueueOf(601));
    const folder = path.join(dir, JOURNAL_DIR);
    const [mine] = await readdir(folder);
    // As a taker does: renamed away (and, here, read and removed by it).
    await rename(path.join(folder, mine!), path.join(dir, "taken.jsonl"));
    await until("the line written again", async () => {
      const lines = await journalLines(dir);
      return lines.length === 1 && JSON.parse(lines[0]!).data.n === 601;
    });
    expect(journal.backlog).toBe(1);
  });

  it("inserts, as the service stops, the request of a delivery it has just answered", async () => {
    const dir = await dataDir();
    const server = await startTestServer({ env: { DATA_DIR: dir } });
    let stopped = false;
    try {
      const { key } = await server.signup();
      const secret = "linear-secret-for-the-journal-0123456789";
      const created = await server.api("POST", "/integrations", {
        key,
        body: {
          type: "linear",
          name: "journal",
          settings: { teams: {} },
          secrets: { webhook_secret: secret, api_key: "lin_api_journal_0123456789" },
        },
      });
      expect(created.status).toBe(201);
      // A labelled issue of a team no setting maps: queued all the same (its job says so
      // on the issue), and nothing in this web-only service runs it.
      const body = JSON.stringify({
        type: "Issue",
        action: "create",
        webhookId: "wh-journal",
        webhookTimestamp: Date.now(),
        data: {
          id: "issue-journal",
          title: "Journal me",
          teamId: "team-ops",
          team: { id: "team-ops", key: "OPS" },
          labels: [{ id: "lbl-agent", name: "agent" }],
          labelIds: ["lbl-agent"],
        },
      });
      const answer = await fetch(`${server.url}/integrations/${created.body.id}/linear/webhook`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "linear-delivery": "dlv-journal",
          "linear-signature": createHmac("sha256", secret).update(body).digest("hex"),
        },
        body,
      });
      expect(answer.status).toBe(200);
      await server.stop();
      stopped = true;
      const after = await mongoose.createConnection(server.service.config.mongodbUri!).asPromise();
      const queued = await after
        .db!.collection("jobs")
        .find({ name: TASK_REQUEST_JOB.name, "data.integration_id": created.body.id })
        .toArray();
      await after.close();
      expect(queued.map((j) => j.data.unmapped)).toEqual(["OPS"]);
      expect(await readdir(path.join(dir, JOURNAL_DIR))).toEqual([]);
    } finally {
      if (!stopped) await server.stop();
    }
  }, 60_000);
});
