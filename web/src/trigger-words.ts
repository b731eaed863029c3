/*
 * An automation's trigger in words, for its card: "Every weekday at 09:00 UTC", "When CI
 * fails on main", "On a webhook". Cron expressions the words below do not cover are shown
 * as they are, with their time zone.
 */

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const NUMBER = /^\d+$/;

function list(items: string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}

/** A day-of-week field in words ("weekday", "Monday and Friday"), or null when it is not simple. */
function daysOfWeek(field: string): string | null {
  if (field === "1-5" || field === "MON-FRI") return "weekday";
  if (field === "0,6" || field === "6,0" || field === "SAT,SUN") return "Saturday and Sunday";
  const parts = field.split(",");
  if (!parts.every((p) => /^[0-7]$/.test(p))) return null;
  return list(parts.map((p) => DAYS[Number(p) % 7]!));
}

function ordinal(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`;
}

/** A five-field cron schedule in words, in `timezone`, or null when it is not a simple one. */
export function cronInWords(schedule: string, timezone = "UTC"): string | null {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5) return null;
  const [minute, hour, dom, month, dow] = fields as [string, string, string, string, string];
  const tz = timezone || "UTC";
  if (minute === "*" && hour === "*" && dom === "*" && month === "*" && dow === "*")
    return "Every minute";
  const step = /^\*\/(\d+)$/.exec(minute);
  if (step && hour === "*" && dom === "*" && month === "*" && dow === "*")
    return `Every ${step[1]} minutes`;
  if (NUMBER.test(minute) && hour === "*" && dom === "*" && month === "*" && dow === "*")
    return `Every hour at ${minute.padStart(2, "0")} minutes past`;
  if (!NUMBER.test(minute) || !NUMBER.test(hour)) return null;
  const at = `at ${hour.padStart(2, "0")}:${minute.padStart(2, "0")} ${tz}`;
  if (dom === "*" && month === "*") {
    if (dow === "*") return `Every day ${at}`;
    const days = daysOfWeek(dow.toUpperCase());
    return days ? `Every ${days} ${at}` : null;
  }
  if (NUMBER.test(dom) && dow === "*") {
    if (month === "*") return `On the ${ordinal(Number(dom))} of every month ${at}`;
    if (NUMBER.test(month) && MONTHS[Number(month) - 1])
      return `Every year on ${MONTHS[Number(month) - 1]} ${Number(dom)} ${at}`;
  }
  return null;
}

export type TriggerWords = {
  /** The sentence. */
  text: string;
  /** The webhook's address, for a webhook trigger. */
  url?: string;
  /** Matching details in words, when any. */
  details: string[];
};

/**
 * A trigger in words. `webhookUrl` is the service's POST /automations/webhook address (the
 * one every webhook automation listens on; its `match` decides which payloads are its).
 */
export function triggerInWords(
  type: string,
  config: Record<string, unknown>,
  webhookUrl: string,
): TriggerWords {
  const str = (v: unknown) => (typeof v === "string" && v.trim() ? v : undefined);
  if (type === "cron") {
    const schedule = str(config.schedule) ?? "";
    const tz = str(config.timezone) ?? "UTC";
    return {
      text: cronInWords(schedule, tz) ?? `On the schedule ${schedule} (${tz})`,
      details: [],
    };
  }
  if (type === "ci_failure") {
    const workflow = str(config.workflow);
    const branch = str(config.branch);
    const text =
      `When CI fails` +
      (workflow ? ` in ${workflow}` : "") +
      (branch ? ` on ${branch}` : " on any branch");
    return { text, details: [] };
  }
  if (type === "webhook") {
    const match = (config.match ?? {}) as Record<string, unknown>;
    const details = Object.entries(match).map(([path, value]) =>
      Array.isArray(value)
        ? `${path} is one of ${value.map((v) => JSON.stringify(v)).join(", ")}`
        : `${path} is ${JSON.stringify(value)}`,
    );
    if (details.length === 0) details.push("every payload matches");
    if (config.secret) details.push("only payloads signed with its secret");
    return { text: "On a webhook", url: webhookUrl, details };
  }
  return { text: type, details: [] };
}
