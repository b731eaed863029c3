/*
 * The diff, file by file: diff2html (maintained, framework-free, ~30 KB compressed with its
 * CSS; unified and split views, collapsible files, correct line numbers) with highlight.js
 * (its core and the common languages only) for syntax colours. This module is its own chunk,
 * loaded by the task page only when a task has a diff.
 */
import { Diff2HtmlUI } from "diff2html/lib/ui/js/diff2html-ui-base.js";
import { ColorSchemeType } from "diff2html/lib/types.js";
import "diff2html/bundles/css/diff2html.min.css";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import ruby from "highlight.js/lib/languages/ruby";
import rust from "highlight.js/lib/languages/rust";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import "./diff-view.css";
import { useLayoutEffect, useRef, useState } from "preact/hooks";

for (const [name, lang] of Object.entries({
  bash,
  c,
  cpp,
  css,
  go,
  java,
  javascript,
  json,
  markdown,
  python,
  ruby,
  rust,
  typescript,
  xml,
  yaml,
}))
  hljs.registerLanguage(name, lang);

export type ReviewComment = { path: string; line: number; body: string; severity: string };

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

const VIEW_KEY = "foreman.diffView";

/** The diff with its view switch; the review's comments sit under the lines they concern. */
export function DiffView({
  diff,
  comments = [],
  label = "Changes",
}: {
  diff: string;
  comments?: ReviewComment[];
  label?: string;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const [view, setView] = useState<"line-by-line" | "side-by-side">(
    localStorage.getItem(VIEW_KEY) === "side-by-side" ? "side-by-side" : "line-by-line",
  );
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const ui = new Diff2HtmlUI(
      el,
      diff,
      {
        drawFileList: true,
        fileListToggle: false,
        outputFormat: view,
        matching: "lines",
        // Coloured after the first paint (below), so a long diff is readable at once.
        highlight: false,
        fileContentToggle: true,
        stickyFileHeaders: false,
        synchronisedScroll: true,
        smartSelection: false,
        colorScheme: ColorSchemeType.AUTO,
      },
      hljs,
    );
    ui.draw();
    // Every scrolling box can be reached and scrolled by keyboard, and says what it holds.
    for (const wrapper of el.querySelectorAll<HTMLElement>(".d2h-file-wrapper")) {
      const name = wrapper.querySelector(".d2h-file-name")?.textContent?.trim() ?? "";
      wrapper
        .querySelectorAll<HTMLElement>(".d2h-file-diff, .d2h-file-side-diff")
        .forEach((box, i, all) => {
          box.tabIndex = 0;
          box.setAttribute("role", "region");
          box.setAttribute(
            "aria-label",
            all.length > 1 ? `${name}, ${i === 0 ? "before" : "after"}` : `Changes in ${name}`,
          );
        });
      const mine = comments.filter((cm) => name === cm.path || name.endsWith(" → " + cm.path));
      // The new side's line numbers: line-num2 (unified) or the right-hand table (split).
      const sides = wrapper.querySelectorAll(".d2h-file-side-diff");
      const scope = sides.length > 1 ? sides[1]! : wrapper;
      const rows = [...scope.querySelectorAll<HTMLTableRowElement>("tbody tr")];
      const lineOf = (r: HTMLTableRowElement) =>
        (
          r.querySelector(".line-num2") ?? r.querySelector(".d2h-code-side-linenumber")
        )?.textContent?.trim();
      for (const cm of mine) {
        const row = rows.find((r) => lineOf(r) === String(cm.line)) ?? rows[rows.length - 1];
        if (!row) continue;
        const note = document.createElement("tr");
        note.className = `review-comment severity-${cm.severity}`;
        note.innerHTML = `<td colspan="2"><strong>${escapeHtml(cm.severity)}</strong> (line ${cm.line}): ${escapeHtml(cm.body)}</td>`;
        row.after(note);
        // Split view: an empty row on the old side keeps the two tables' lines level.
        if (sides.length > 1) {
          const left = sides[0]!.querySelectorAll("tbody tr")[rows.indexOf(row)];
          const pad = document.createElement("tr");
          pad.className = "review-comment-pad";
          pad.innerHTML = `<td colspan="2">${escapeHtml(cm.body)}</td>`;
          left?.after(pad);
        }
      }
    }
    // Colours after the first paint, one file per task, so a long diff is readable at once
    // and the page stays responsive while the colours arrive.
    const files = [...el.querySelectorAll<HTMLElement>(".d2h-file-wrapper")];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const colourNext = () => {
      const file = files.shift();
      if (!file) return;
      // highlightCode() colours every file under its target: here, the one file.
      const one = Object.create(ui, {
        targetElement: { value: { querySelectorAll: () => [file] } },
      }) as Diff2HtmlUI;
      ui.highlightCode.call(one);
      timer = setTimeout(colourNext, 0);
    };
    const frame = requestAnimationFrame(() => (timer = setTimeout(colourNext, 0)));
    return () => {
      cancelAnimationFrame(frame);
      clearTimeout(timer);
    };
    // A re-fetched task gives equal comments in a new array: redraw only when they differ.
  }, [diff, JSON.stringify(comments), view]);
  const choose = (v: typeof view) => {
    localStorage.setItem(VIEW_KEY, v);
    setView(v);
  };
  const toggleAll = (viewed: boolean) => {
    for (const box of ref.current?.querySelectorAll<HTMLInputElement>(".d2h-file-collapse-input") ??
      [])
      if (box.checked !== viewed) box.click();
  };
  return (
    <div class="diff-view">
      <div class="diff-tools" role="group" aria-label={`${label}: view`}>
        <button
          type="button"
          aria-pressed={view === "line-by-line"}
          onClick={() => choose("line-by-line")}
        >
          Unified
        </button>
        <button
          type="button"
          aria-pressed={view === "side-by-side"}
          onClick={() => choose("side-by-side")}
        >
          Split
        </button>
        <button type="button" onClick={() => toggleAll(true)}>
          Collapse all
        </button>
        <button type="button" onClick={() => toggleAll(false)}>
          Expand all
        </button>
      </div>
      <div ref={ref} class="diff" data-testid="diff" />
    </div>
  );
}
