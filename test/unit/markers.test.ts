import type { Collection, Document } from "mongodb";
import { describe, expect, it } from "vitest";
import {
  claimOnce,
  declaredMarkerKinds,
  generationMarker,
  type Marker,
} from "../../src/durable/once.js";
import { cronSlotMarker } from "../../src/domain/automations/automations.js";
import { healthEndMarker } from "../../src/domain/health/reports.js";
import {
  slackInstallStateMarker,
  slackInstallStateUsedMarker,
} from "../../src/integrations/slack/install.js";
import {
  githubLinkMarker,
  linkStateMarker,
  linkStateUsedMarker,
  workspaceLockMarker,
} from "../../src/domain/workspaces/linking.js";
import { githubProgressLockMarker, githubProgressMarker } from "../../src/domain/tasks/progress.js";
import { taskEndMarker } from "../../src/domain/tasks/endings.js";
import { gateMarker } from "../../src/domain/tasks/gates.js";
import { stageDoneMarker } from "../../src/domain/tasks/model.js";
import { taskRetryMarker } from "../../src/domain/tasks/revisions.js";
import { jobLock } from "../../src/durable/exclusive-locks.js";
import { healthLease, stageLease } from "../../src/durable/lease.js";
import { githubAutoReviewMarker } from "../../src/github/auto-review.js";
import { ciFixBranchMarker, ciFixMarker } from "../../src/github/ci.js";
import { githubCommandMarker } from "../../src/github/commands.js";
import { githubDeliveryMarker } from "../../src/github/delivery.js";
import { githubFollowUpMarker } from "../../src/github/follow-ups.js";
import { githubLabelMarker } from "../../src/github/issues.js";
import { githubNoticeMarker } from "../../src/github/notices.js";
import { jiraDeliveryMarker } from "../../src/integrations/jira/door.js";
import { linearDeliveryMarker } from "../../src/integrations/linear/door.js";
import { integrationNoticeMarker } from "../../src/integrations/shared/notices.js";
import { slackDeliveryMarker } from "../../src/integrations/slack/door.js";
import { taskSweepMarker } from "../../src/pipeline/sweeper.js";
// Declare the generation markers that their modules keep to themselves.
import "../../src/pipeline/intake.js";
import "../../src/domain/accounts/views.js";
import type { OnceRecord } from "../../src/db/models.js";

/*
 * The ids of once-markers are stored for days: a builder that changed its output would let a
 * redelivered webhook, a repeated command or a lost lease race happen twice on a running
 * database. Each kind is declared by the module that owns it (`markerKind`, durable/once.ts);
 * each expectation is the id the service's hand-built template strings gave before kinds
 * were declared, e.g. `gh-command:${comment_id}`, `lease:${task}:${stage}` +
 * `:${attempt}`, `job-lock:${job}:${nextRunAt ms|-}:${lastRunAt ms|-}:${lockedAt ms|-}`,
 * with the scope it was stored under.
 */

const slot = new Date("2025-03-04T05:06:00.000Z");
const next = new Date(1_700_000_000_000);
const last = new Date(1_700_000_060_000);

const PINNED: Record<string, [Marker, string, string][]> = {
  githubDelivery: [[githubDeliveryMarker("d-1"), "delivery:d-1", "github-delivery"]],
  githubCommand: [[githubCommandMarker(42), "gh-command:42", "github-command"]],
  githubNotice: [[githubNoticeMarker("t1", "plan"), "gh-notice:t1:plan", "github-notice"]],
  githubFollowUp: [[githubFollowUpMarker("review:7"), "gh-follow-up:review:7", "github-follow-up"]],
  githubProgress: [[githubProgressMarker("t1"), "gh-progress:t1", "github-progress"]],
  githubProgressLock: [
    [githubProgressLockMarker("t1"), "gh-progress-lock:t1", "github-progress-lock"],
  ],
  githubLabel: [[githubLabelMarker("d-2:7"), "gh-label:d-2:7", "github-label"]],
  ciFix: [[ciFixMarker("99", "abc123"), "ci-fix:99:abc123", "github-ci"]],
  githubAutoReview: [
    [githubAutoReviewMarker("99", 7, "abc123"), "gh-auto-review:99:7:abc123", "github-auto-review"],
  ],
  ciFixBranch: [
    [ciFixBranchMarker("99", "foreman/fix-1"), "ci-fix-branch:99:foreman/fix-1", "github-ci"],
  ],
  githubLink: [[githubLinkMarker(1234), "github-link:1234", "github-link"]],
  linkState: [
    [
      linkStateMarker("fixed-state"),
      // sha256("fixed-state"), base64url
      "link-state:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg",
      "github-link-state",
    ],
  ],
  linkStateUsed: [
    [
      linkStateUsedMarker("fixed-state"),
      "link-state:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg:used",
      "github-link-state",
    ],
  ],
  workspaceLock: [[workspaceLockMarker("gh-1234"), "workspace-lock:gh-1234", "workspace-lock"]],
  slackDelivery: [
    [slackDeliveryMarker("int-1", "Ev123"), "slack:int-1:Ev123", "slack-delivery"],
    [
      slackDeliveryMarker("int-1", "C1:1700000000.0001"),
      "slack:int-1:C1:1700000000.0001",
      "slack-delivery",
    ],
  ],
  slackInstallState: [
    [
      slackInstallStateMarker("fixed-state"),
      "slack-install:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg",
      "slack-install-state",
    ],
  ],
  slackInstallStateUsed: [
    [
      slackInstallStateUsedMarker("fixed-state"),
      "slack-install:Utpef00eGpWuPwBdOwo7woXArKL0gQxdkN7gx8VS2Yg:used",
      "slack-install-state",
    ],
  ],
  linearDelivery: [
    [
      linearDeliveryMarker("int-2", "wh-1:1700000000"),
      "linear:int-2:wh-1:1700000000",
      "linear-delivery",
    ],
  ],
  jiraDelivery: [
    [
      jiraDeliveryMarker("int-3", "jira:issue_updated:17:10001:"),
      "jira:int-3:jira:issue_updated:17:10001:",
      "jira-delivery",
    ],
  ],
  integrationNotice: [
    [integrationNoticeMarker("t1", "end"), "int-notice:t1:end", "integration-notice"],
  ],
  taskEnd: [[taskEndMarker("t1"), "task-end:t1", "task-end"]],
  gate: [
    [gateMarker("t1", "plan"), "gate:t1:plan", "gate"],
    [gateMarker("t1", "diff"), "gate:t1:diff", "gate"],
    [gateMarker("t1", "diff", 2), "gate:t1:diff:2", "gate"],
  ],
  stageLease: [
    [stageLease("t1", "plan", 0), "lease:t1:plan:0", "lease"],
    [stageLease("t1", "implement", 2), "lease:t1:implement:2", "lease"],
  ],
  taskRetry: [[taskRetryMarker("t1", 1), "task-retry:t1:1", "task-retry"]],
  stageDone: [[stageDoneMarker("t1", "plan"), "stage-done:t1:plan", "stage-done"]],
  taskSweep: [[taskSweepMarker(slot), "task-sweep:2025-03-04T05:06:00.000Z", "task-sweep"]],
  healthEnd: [[healthEndMarker("r1"), "health-end:r1", "health-end"]],
  healthLease: [[healthLease("r1", 1), "health-lease:r1:1", "health-lease"]],
  cronSlot: [[cronSlotMarker("a1", slot), "cron:a1:2025-03-04T05:06:00.000Z", "automation-cron"]],
  jobLock: [
    [jobLock("65f0c0ffee", next, null, null), "job-lock:65f0c0ffee:1700000000000:-:-", "job-lock"],
    [
      jobLock("65f0c0ffee", next, last, next),
      "job-lock:65f0c0ffee:1700000000000:1700000060000:1700000000000",
      "job-lock",
    ],
    [jobLock("65f0c0ffee", null, undefined, null), "job-lock:65f0c0ffee:-:-:-", "job-lock"],
  ],
  generation: [
    [generationMarker("tasks-queued"), "tasks-queued", "marker"],
    [generationMarker("workspaces-generation"), "workspaces-generation", "marker"],
    [generationMarker("account-tiers-generation"), "account-tiers-generation", "marker"],
    [generationMarker("accounts-generation"), "accounts-generation", "marker"],
    [generationMarker("integrations-generation"), "integrations-generation", "marker"],
  ],
};

describe("the once-marker kinds their owners declare", () => {
  it.each(Object.entries(PINNED))("%s builds the id and scope stored before", (_, cases) => {
    for (const [marker, id, scope] of cases) expect(marker).toEqual({ id, scope });
  });

  it("pins every declared kind (prefix and scope)", () => {
    const pinned = new Set(
      Object.values(PINNED)
        .flat()
        .map(([marker]) => `${marker.id.split(":")[0]} ${marker.scope}`),
    );
    const declared = declaredMarkerKinds().map(({ prefix, scope }) => `${prefix} ${scope}`);
    expect(declared.sort()).toEqual([...pinned].sort());
  });

  it("refuses a prefix declared again with another scope", async () => {
    const { markerKind } = await import("../../src/durable/once.js");
    expect(() => markerKind("task-end", "another-scope", (id: string) => [id])).toThrow(
      /"task-end" is declared with scope "task-end" and "another-scope"/,
    );
  });

  it("keeps each kind's prefix and scope readable for queries by kind", () => {
    expect(jobLock.scope).toBe("job-lock");
    expect(githubDeliveryMarker.prefix).toBe("delivery");
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
    const marker = taskEndMarker("t1");
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
    await claimOnce(collection, workspaceLockMarker("w1"), { created_at: at, updated_at: at });
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
    await expect(claimOnce(collection, taskEndMarker("t1"))).rejects.toThrow("connection lost");
  });
});
