import { describe, expect, it } from "vitest";
import {
  dateIn,
  isSlot,
  latestSlot,
  nextSlot,
  normalizeSchedule,
  scheduleProblem,
  timezoneProblem,
} from "../../src/domain/automations/cron.js";

/** Cron schedules of automations: validation, slots and the calendar date of a slot. */

describe("scheduleProblem", () => {
  it("accepts five-field expressions", () => {
    for (const ok of ["* * * * *", "*/5 * * * *", "0 9 * * MON-FRI", " 30  2 1 * * "])
      expect(scheduleProblem(ok), ok).toBeNull();
  });

  it("refuses other field counts, aliases, out-of-range values and dates that never come", () => {
    for (const bad of [
      "",
      "* * * *",
      "0 * * * * *",
      "@daily",
      "61 * * * *",
      "0 25 * * *",
      "0 9 31 2 *",
      "every minute",
    ])
      expect(scheduleProblem(bad), bad).toEqual(expect.any(String));
  });

  it("normalizes whitespace", () => {
    expect(normalizeSchedule("  0   9 * *  1 ")).toBe("0 9 * * 1");
  });
});

describe("timezoneProblem", () => {
  it("accepts IANA names", () => {
    for (const ok of ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5"])
      expect(timezoneProblem(ok), ok).toBeNull();
  });

  it("refuses unknown names and bare offsets", () => {
    for (const bad of ["Mars/Olympus", "+01:00", "Europe/Nowhere", "utc offset"])
      expect(timezoneProblem(bad), bad).toEqual(expect.any(String));
  });
});

describe("slots", () => {
  it("finds the latest slot at or before an instant, and the next one after it", () => {
    const at = new Date("2026-03-10T10:17:42.500Z");
    expect(latestSlot("*/5 * * * *", "UTC", at).toISOString()).toBe("2026-03-10T10:15:00.000Z");
    expect(nextSlot("*/5 * * * *", "UTC", at)?.toISOString()).toBe("2026-03-10T10:20:00.000Z");
    const exact = new Date("2026-03-10T10:15:00.000Z");
    expect(latestSlot("*/5 * * * *", "UTC", exact).toISOString()).toBe(exact.toISOString());
    expect(nextSlot("*/5 * * * *", "UTC", exact)?.toISOString()).toBe("2026-03-10T10:20:00.000Z");
  });

  it("reads the schedule in its time zone", () => {
    // 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
    const winter = latestSlot("0 9 * * *", "Europe/Berlin", new Date("2026-01-15T12:00:00Z"));
    expect(winter.toISOString()).toBe("2026-01-15T08:00:00.000Z");
    const summer = latestSlot("0 9 * * *", "Europe/Berlin", new Date("2026-07-15T12:00:00Z"));
    expect(summer.toISOString()).toBe("2026-07-15T07:00:00.000Z");
  });

  it("tells slots from other instants", () => {
    expect(isSlot("0 * * * *", "UTC", new Date("2026-03-10T10:00:00.000Z"))).toBe(true);
    expect(isSlot("0 * * * *", "UTC", new Date("2026-03-10T10:00:00.001Z"))).toBe(false);
    expect(isSlot("0 * * * *", "UTC", new Date("2026-03-10T10:30:00.000Z"))).toBe(false);
  });

  it("gives the calendar date in the schedule's time zone", () => {
    const at = new Date("2026-03-10T23:30:00Z");
    expect(dateIn("UTC", at)).toBe("2026-03-10");
    expect(dateIn("Asia/Tokyo", at)).toBe("2026-03-11");
    expect(dateIn("America/Los_Angeles", at)).toBe("2026-03-10");
  });
});
