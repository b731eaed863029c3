/// <reference lib="dom" />
import { existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { createRequire } from "node:module";
import { chromium, type Browser, type Page } from "playwright-core";
import { expect } from "vitest";

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it), or CHROMIUM_PATH. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Headless Chromium with the flags this closed network needs (no background connections). */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `No Chromium at ${CHROMIUM}: run 'apt-get install -y chromium' (.ci/run does) or set CHROMIUM_PATH.`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

const axeSource = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
let axeText: string | undefined;

/** Runs axe-core on the page; fails on any serious or critical violation, naming them. */
export async function expectAccessible(page: Page, label: string): Promise<void> {
  // Evaluated through the DevTools protocol: the dashboard's CSP rightly refuses injected tags.
  axeText ??= await readFile(axeSource, "utf8");
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(axeText);
  const result = (await page.evaluate(() =>
    (window as unknown as { axe: { run: (ctx: Document, o: object) => Promise<unknown> } }).axe.run(
      document,
      {
        resultTypes: ["violations"],
      },
    ),
  )) as {
    violations: Array<{
      id: string;
      impact: string | null;
      help: string;
      nodes: Array<{ target: unknown }>;
    }>;
  };
  const bad = result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} at ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`,
    );
  expect(bad.join("\n"), `accessibility of ${label}`).toBe("");
}

/** Where screenshots go (gitignored); docs/screenshots holds the ones the README shows. */
export const SCREENSHOT_DIR = path.resolve("test-results/screenshots");

export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}
