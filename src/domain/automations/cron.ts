import { CronExpressionParser } from "cron-parser";

/*
 * Cron schedules of automations (docs/api.md, "Cron"): five fields, an IANA time zone (UTC by
 * default), and the slots they define. Agenda runs the jobs with the same parser (cron-parser),
 * so a schedule accepted here is one Agenda can repeat.
 */

export const DEFAULT_TIMEZONE = "UTC";

/** Why a schedule is not a valid five-field cron expression, or null when it is. */
export function scheduleProblem(schedule: string): string | null {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5 || fields[0] === "")
    return "must be a five-field cron expression (minute hour day-of-month month day-of-week)";
  if (fields.some((f) => f.startsWith("@")))
    return "must be a five-field cron expression, not an @-alias";
  try {
    CronExpressionParser.parse(fields.join(" "), { tz: DEFAULT_TIMEZONE }).next();
    return null;
  } catch (error) {
    return `is not a valid cron expression: ${(error as Error).message}`;
  }
}

/** Why a time zone is not an IANA zone name this runtime knows, or null when it is. */
export function timezoneProblem(timezone: string): string | null {
  try {
    // Throws RangeError for a zone the runtime does not know.
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    return "must be an IANA time zone name such as UTC or Europe/Berlin";
  }
  // Intl also takes offsets such as "+01:00"; Agenda and cron-parser want zone names.
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(timezone))
    return "must be an IANA time zone name such as UTC or Europe/Berlin";
  try {
    CronExpressionParser.parse("* * * * *", { tz: timezone }).next();
  } catch {
    return "must be an IANA time zone name such as UTC or Europe/Berlin";
  }
  return null;
}

/** The schedule in its canonical form: fields separated by one space. */
export function normalizeSchedule(schedule: string): string {
  return schedule.trim().split(/\s+/).join(" ");
}

/** The latest slot of the schedule at or before `at`. */
export function latestSlot(schedule: string, timezone: string, at: Date): Date {
  // cron-parser's prev() is strictly before its current date; one millisecond later makes
  // a slot exactly at `at` count.
  const cron = CronExpressionParser.parse(schedule, {
    tz: timezone,
    currentDate: new Date(at.getTime() + 1),
  });
  return cron.prev().toDate();
}

/** The first slot of the schedule strictly after `after`, or null if there is none. */
export function nextSlot(schedule: string, timezone: string, after: Date): Date | null {
  try {
    return CronExpressionParser.parse(schedule, { tz: timezone, currentDate: after })
      .next()
      .toDate();
  } catch {
    return null;
  }
}

/** True when `date` is exactly a slot of the schedule (to the millisecond). */
export function isSlot(schedule: string, timezone: string, date: Date): boolean {
  return latestSlot(schedule, timezone, date).getTime() === date.getTime();
}

/** The calendar date of `at` in the time zone, `YYYY-MM-DD`. */
export function dateIn(timezone: string, at: Date): string {
  // en-CA formats dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat("en-CA", {
    timeZone: timezone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  }).format(at);
}
