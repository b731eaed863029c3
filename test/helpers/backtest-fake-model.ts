import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import type { CasesFile } from "../../src/backtest/types.js";
import { agentModel, type Script } from "./agent-model.js";
import { startFakeModel } from "./fake-model.js";

/*
 * By hand (README "Backtest"): an oracle or null model for `npm run backtest` on a real
 * history, as a local OpenAI-compatible server.
 *   npx tsx test/helpers/backtest-fake-model.ts null
 *   npx tsx test/helpers/backtest-fake-model.ts oracle <mirror.git> <cases.json>
 * prints its base URL; the oracle answers each case's task with the commit's own source
 * files (found by the task text), the null model finishes without a change.
 */

const run = promisify(execFile);

async function main(): Promise<void> {
  const [mode, mirror, casesPath] = process.argv.slice(2);
  if (mode !== "null" && (mode !== "oracle" || !mirror || !casesPath)) {
    throw new Error("usage: backtest-fake-model.ts <oracle <mirror.git> <cases.json> | null>");
  }
  const { cases } = casesPath
    ? (JSON.parse(await readFile(casesPath, "utf8")) as CasesFile)
    : { cases: [] };
  const gold = new Map<string, Record<string, string>>();
  for (const c of cases.filter((x) => x.validity === "valid")) {
    const files: Record<string, string> = {};
    for (const f of c.source_files) {
      files[f] = await run("git", ["show", `${c.commit}:${f}`], {
        cwd: mirror!,
        maxBuffer: 64 << 20,
      }).then(
        (r) => r.stdout,
        () => "",
      );
    }
    gold.set(JSON.stringify(c.message).slice(1, -1), files);
  }
  const goldFor = (messages: unknown) => {
    const text = JSON.stringify(messages);
    let best: [string, Record<string, string>] | undefined;
    for (const entry of gold)
      if (text.includes(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
    return best?.[1] ?? {};
  };
  const plan = {
    summary: "Make the change.",
    steps: [{ title: "Change", description: "As the task asks.", files: [] }],
  };
  const script: Script = {
    plan: () => [{ name: "submit_plan", arguments: plan }],
    implement: (request, n) => {
      const files = n === 0 && mode === "oracle" ? Object.entries(goldFor(request.messages)) : [];
      if (files.length === 0) return [{ name: "finish", arguments: { summary: "Done." } }];
      return files.map(([path, content]) => ({ name: "write_file", arguments: { path, content } }));
    },
    fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
    review: () => [
      { name: "submit_review", arguments: { verdict: "approve", summary: "Fine.", comments: [] } },
    ],
  };
  const model = await startFakeModel(agentModel(script));
  process.stdout.write(`${model.baseUrl}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
