import { describe, expect, it } from "vitest";
import { cronInWords, triggerInWords } from "../../web/src/trigger-words.js";

/* The dashboard's automation triggers in words (issue 43): the sentence each card shows. */
describe("triggers in words", () => {
  it("reads the usual cron schedules, and leaves others as they are", () => {
    expect(cronInWords("0 9 * * 1-5")).toBe("Every weekday at 09:00 UTC");
    expect(cronInWords("30 7 * * *", "Europe/Berlin")).toBe("Every day at 07:30 Europe/Berlin");
    expect(cronInWords("0 9 * * 1")).toBe("Every Monday at 09:00 UTC");
    expect(cronInWords("0 18 * * 1,5")).toBe("Every Monday and Friday at 18:00 UTC");
    expect(cronInWords("0 0 1 * *")).toBe("On the 1st of every month at 00:00 UTC");
    expect(cronInWords("*/15 * * * *")).toBe("Every 15 minutes");
    expect(cronInWords("5 * * * *")).toBe("Every hour at 05 minutes past");
    expect(cronInWords("0 9-17 * * *")).toBeNull();
    expect(triggerInWords("cron", { schedule: "0 9-17 * * *" }, "").text).toBe(
      "On the schedule 0 9-17 * * * (UTC)",
    );
  });

  it("names a CI failure's workflow and branch, and a webhook's URL and rules", () => {
    expect(triggerInWords("ci_failure", { branch: "main" }, "").text).toBe("When CI fails on main");
    expect(triggerInWords("ci_failure", { workflow: "CI*" }, "").text).toBe(
      "When CI fails in CI* on any branch",
    );
    const hook = triggerInWords(
      "webhook",
      { match: { action: ["opened", "edited"] }, secret: "********" },
      "https://f.example/automations/webhook",
    );
    expect(hook).toEqual({
      text: "On a webhook",
      url: "https://f.example/automations/webhook",
      details: ['action is one of "opened", "edited"', "only payloads signed with its secret"],
    });
  });
});
