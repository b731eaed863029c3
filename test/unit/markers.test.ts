import type { Collection, Document } from "mongodb";
import { describe, expect, it } from "vitest";
import { claimOnce, markers, type Marker } from "../../src/durable/once.js";
import type { OnceRecord } from "../../src/db/models.js";

/*
 * The ids of once-markers are stored for days: a builder that changed its output would let a
 * redelivered webhook, a repeated command or a lost lease race happen twice on a running
 * database. Each expectation is the id the service's hand-built template strings gave before
 * the catalogue (durable/once.ts), e.g. `gh-command:${comment_id}`, `lease:${task}:${stage}` +
 * `:${attempt}`, `job-lock:${job}:${nextRunAt ms|-}:${lastRunAt ms|-}:${lockedAt ms|-}`,
 * with the scope it was stored under.
 */

const slot = new Date("2025-03-04T05:06:00.000Z");
const next = new Date(1_700_000_000_000);
const last = new Date(1_700_000_060_000);

const PINNED: Record<keyof typeof markers, [Marker, string, string][]> = {
  githubDelivery: [[markers.githubDelivery("d-1"), "delivery:d-1", "github-delivery"]],
  githubCommand: [[markers.githubCommand(42), "gh-command:42", "github-command"]],
  githubNotice: [[markers.githubNotice("t1", "plan"), "gh-notice:t1:plan", "github-notice"]],
  githubFollowUp: [
    [markers.githubFollowUp("review:7"), "gh-follow-up:review:7", "github-follow-up"],
  ],
  githubProgress: [[markers.githubProgress("t1"), "gh-progress:t1", "github-progress"]],
  githubProgressLock: [
    [markers.githubProgressLock("t1"), "gh-progress-lock:t1", "github-progress-lock"],
  ],
  githubLabel: [[markers.githubLabel("d-2:7"), "gh-label:d-2:7", "github-label"]],
  ciFix: [[markers.ciFix("99", "abc123"), "ci-fix:99:abc123", "github-ci"]],
  githubAutoReview: [
    [
      markers.githubAutoReview("99", 7, "abc123"),
      "gh-auto-review:99:7:abc123",
      "github-auto-review",
    ],
  ],
  ciFixBranch: [
    [markers.ciFixBranch("99", "foreman/fix-1"), "ci-fix-branch:99:foreman/fix-1", "github-ci"],
  ],
  githubLink: [[markers.githubLink(1234), "github-link:1234", "github-link"]],
  linkState: [
    [
      markers.linkState("fixed-state"),
      // sha256("fixed-state"), base64url
      "link-state:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg",
      "github-link-state",
    ],
  ],
  linkStateUsed: [
    [
      markers.linkStateUsed("fixed-state"),
      "link-state:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg:used",
      "github-link-state",
    ],
  ],
  workspaceLock: [[markers.workspaceLock("gh-1234"), "workspace-lock:gh-1234", "workspace-lock"]],
  slackDelivery: [
    [markers.slackDelivery("int-1", "Ev123"), "slack:int-1:Ev123", "slack-delivery"],
    [
      markers.slackDelivery("int-1", "C1:1700000000.0001"),
      "slack:int-1:C1:1700000000.0001",
      "slack-delivery",
    ],
  ],
  slackInstallState: [
    [
      markers.slackInstallState("fixed-state"),
      "slack-install:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg",
      "slack-install-state",
    ],
  ],
  slackInstallStateUsed: [
    [
      markers.slackInstallStateUsed("fixed-state"),
      "slack-install:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg:used",
      "slack-install-state",
    ],
  ],
  linearDelivery: [
    [
      markers.linearDelivery("int-2", "wh-1:1700000000"),
      "linear:int-2:wh-1:1700000000",
      "linear-delivery",
    ],
  ],
  jiraDelivery: [
    [
      markers.jiraDelivery("int-3", "jira:issue_updated:17:10001:"),
      "jira:int-3:jira:issue_updated:17:10001:",
      "jira-delivery",
    ],
  ],
  integrationNotice: [
    [markers.integrationNotice("t1", "end"), "int-notice:t1:end", "integration-notice"],
  ],
  taskEnd: [[markers.taskEnd("t1"), "task-end:t1", "task-end"]],
  gate: [
    [markers.gate("t1", "plan"), "gate:t1:plan", "gate"],
    [markers.gate("t1", "diff"), "gate:t1:diff", "gate"],
    [markers.gate("t1", "diff", 2), "gate:t1:diff:2", "gate"],
  ],
  stageLease: [
    [markers.stageLease("t1", "plan", 0), "lease:t1:plan:0", "lease"],
    [markers.stageLease("t1", "implement", 2), "lease:t1:implement:2", "lease"],
  ],
  taskRetry: [[markers.taskRetry("t1", 1), "task-retry:t1:1", "task-retry"]],
  stageDone: [[markers.stageDone("t1", "plan"), "stage-done:t1:plan", "stage-done"]],
  taskSweep: [[markers.taskSweep(slot), "task-sweep:2025-03-04T05:06:00.000Z", "task-sweep"]],
  healthEnd: [[markers.healthEnd("r1"), "health-end:r1", "health-end"]],
  healthLease: [[markers.healthLease("r1", 1), "health-lease:r1:1", "health-lease"]],
  cronSlot: [[markers.cronSlot("a1", slot), "cron:a1:2025-03-04T05:06:00.000Z", "automation-cron"]],
  jobLock: [
    [
      markers.jobLock("65f0c0ffee", next, null, null),
      "job-lock:65f0c0ffee:1700000000000:-:-",
      "job-lock",
    ],
    [
      markers.jobLock("65f0c0ffee", next, last, next),
      "job-lock:65f0c0ffee:1700000000000:1700000060000:1700000000000",
      "job-lock",
    ],
    [markers.jobLock("65f0c0ffee", null, undefined, null), "job-lock:65f0c0ffee:-:-:-", "job-lock"],
  ],
  generation: [
    [markers.generation("tasks-queued"), "tasks-queued", "marker"],
    [markers.generation("workspaces-generation"), "workspaces-generation", "marker"],
    [markers.generation("account-tiers-generation"), "account-tiers-generation", "marker"],
    [markers.generation("accounts-generation"), "accounts-generation", "marker"],
    [markers.generation("integrations-generation"), "integrations-generation", "marker"],
  ],
};

describe("the catalogue of once-marker ids", () => {
  it.each(Object.entries(PINNED))("%s builds the id and scope stored before", (_, cases) => {
    for (const [marker, id, scope] of cases) expect(marker).toEqual({ id, scope });
  });

  it("pins every kind of the catalogue", () => {
    expect(Object.keys(PINNED).sort()).toEqual(Object.keys(markers).sort());
  });

  it("keeps each kind's prefix and scope readable for queries by kind", () => {
    expect(markers.jobLock.scope).toBe("job-lock");
    expect(markers.githubDelivery.prefix).toBe("delivery");
  });
});

describe("claimOnce", () => {
  function fakeCollection() {
    const docs = new Map<string, Document>();
    const collection = {
      async insertOne(doc: Document) {
        if (docs.has(doc._id))
          throw Object.assign(new Error("E11000 duplicate key"), { code: 11000 });
        docs.set(doc._id, doc);
        return { acknowledged: true, insertedId: doc._id };
      },
    } as unknown as Collection<OnceRecord>;
    return { docs, collection };
  }

  it("stores the marker's id and scope with the fields once, false for every later claim", async () => {
    const { docs, collection } = fakeCollection();
    const marker = markers.taskEnd("t1");
    expect(await claimOnce(collection, marker, { ending: { status: "completed" } })).toBe(true);
    expect(await claimOnce(collection, marker)).toBe(false);
    const doc = docs.get("task-end:t1")!;
    expect(doc).toMatchObject({
      _id: "task-end:t1",
      scope: "task-end",
      ending: { status: "completed" },
    });
    expect(doc.created_at).toBeInstanceOf(Date);
  });

  it("keeps a created_at the caller gives", async () => {
    const { docs, collection } = fakeCollection();
    const at = new Date("2025-01-01T00:00:00.000Z");
    await claimOnce(collection, markers.workspaceLock("w1"), { created_at: at, updated_at: at });
    expect(docs.get("workspace-lock:w1")).toEqual({
      _id: "workspace-lock:w1",
      scope: "workspace-lock",
      created_at: at,
      updated_at: at,
    });
  });

  it("passes on errors other than a duplicate key", async () => {
    const collection = {
      insertOne: () => Promise.reject(new Error("connection lost")),
    } as unknown as Collection<OnceRecord>;
    await expect(claimOnce(collection, markers.taskEnd("t1"))).rejects.toThrow("connection lost");
  });
});
