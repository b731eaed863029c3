/*
 * Comment commands (docs/api.md, "Comment commands"): `/task <text>`, `/agent <name> [text]`,
 * `/review`, `/describe`, `/ask <question>`, `/improve`, `/approve`, `/reject`, `/approve-diff`, `/reject-diff`, `/status`, `/help`, also
 * addressed as `@<app-slug> <command> ...`. A command starts a line outside quotes and code
 * blocks.
 */

export const COMMAND_NAMES = [
  "task",
  "agent",
  "review",
  "describe",
  "ask",
  "improve",
  "approve",
  "reject",
  "approve-diff",
  "reject-diff",
  "status",
  "help",
] as const;
export type CommandName = (typeof COMMAND_NAMES)[number];

export interface Command {
  name: CommandName;
  /** Everything after the command word: the rest of its line and the lines below it. */
  text: string;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The first command of a comment, or null. `text` keeps the following lines so a `/task`
 * can be described at length; quoted lines (`> /task`) and fenced code are ignored.
 */
export function parseCommand(body: string, slug: string | undefined): Command | null {
  const names = [...COMMAND_NAMES]
    .sort((a, b) => b.length - a.length)
    .map(escape)
    .join("|");
  const mention = slug ? `@${escape(slug)}(?:\\[bot\\])?\\s+\\/?` : null;
  const start = new RegExp(
    `^\\s*(?:\\/|${mention ?? "(?!)"})(${names})(?![\\w-])[ \\t]*(.*)$`,
    "i",
  );
  const lines = body.replace(/\r\n?/g, "\n").split("\n");
  let fenced = false;
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced || /^\s*>/.test(line)) continue;
    const match = start.exec(line);
    if (!match) continue;
    const name = match[1]!.toLowerCase() as CommandName;
    const rest = [match[2] ?? "", ...lines.slice(i + 1)].join("\n").trim();
    return { name, text: rest };
  }
  return null;
}

/** The reply to `/help`. */
export function helpText(slug: string | undefined): string {
  const at = slug ? ` (or \`@${slug} <command>\`)` : "";
  return [
    `Commands${at}, for people with write access to this repository:`,
    "",
    "| command | what it does |",
    "|---|---|",
    "| `/task <what to do>` | plans the change and posts the plan here for approval (on a pull request, works on its branch) |",
    "| `/agent <name> [details]` | runs a built-in agent (see `GET /agents`) on this repository |",
    "| `/review` | reviews this pull request and posts the review |",
    "| `/describe` | writes this pull request's title and description from its diff |",
    "| `/ask <question>` | answers a question about this pull request or its repository |",
    "| `/improve` | posts code suggestions on this pull request's changed lines |",
    "| `/approve`, `/reject` | approves or rejects the plan of this thread's task |",
    "| `/approve-diff`, `/reject-diff` | approves the change (opens the pull request) or drops it |",
    "| `/status` | shows the state of this thread's latest task |",
    "| `/help` | this list |",
  ].join("\n");
}
