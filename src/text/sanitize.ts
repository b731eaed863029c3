/*
 * Text written by GitHub users (comments, issue bodies, check output) is untrusted before
 * it reaches a model: content a reader of the thread cannot see is removed, so nobody can
 * hide instructions for the model in a comment that looks harmless (HTML comments,
 * invisible characters, image alt text, link titles, hidden HTML). Every door that takes in
 * such text (GitHub, Slack, Linear, Jira) and the domain make it safe here, the same way.
 */

const HTML_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
/** Unicode format characters (zero-width spaces and joiners, bidi controls, BOM, soft hyphen). */
const INVISIBLE = /[\p{Cf}\u115F\u1160\u3164\uFFA0]/gu;
/** Numeric character references that decode to invisible characters. */
const INVISIBLE_ENTITY =
  /&#(?:x(?:200[b-f]|202[a-e]|206[0-9a-f]|feff|ad)|(?:8203|8204|8205|8206|8207|173|65279));/gi;
const HIDDEN_ELEMENT =
  /<([a-z][a-z0-9-]*)\b[^>]*(?:\shidden\b|style\s*=\s*["'][^"']*(?:display\s*:\s*none|visibility\s*:\s*hidden)[^"']*["'])[^>]*>[\s\S]*?<\/\1\s*>/gi;
const HIDDEN_ATTRIBUTE =
  /\s(?:alt|title|aria-[a-z-]+|data-[a-z0-9-]+|placeholder)\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)/gi;
const IMAGE_ALT = /!\[[^\]]*\]\(/g;
const LINK_TITLE = /(\[[^\]]*\]\([^)\s]+)\s+(?:"[^"]*"|'[^']*'|\([^)]*\))\)/g;
const REFERENCE_TITLE = /^(\s*\[[^\]]+\]:\s*\S+)\s+(?:"[^"]*"|'[^']*'|\([^)]*\))\s*$/gm;

/** The text as a reader of the thread sees it, without anything hidden in it. */
export function sanitizeUntrusted(text: string): string {
  let out = text.replace(/\r\n?/g, "\n");
  out = out.replace(HTML_COMMENT, "");
  out = out.replace(INVISIBLE_ENTITY, "");
  out = out.replace(INVISIBLE, "");
  // Hidden elements may nest; repeat until nothing changes (bounded).
  for (let i = 0; i < 5; i += 1) {
    const next = out.replace(HIDDEN_ELEMENT, "");
    if (next === out) break;
    out = next;
  }
  out = out.replace(/<[a-z][^>]*>/gi, (tag) => tag.replace(HIDDEN_ATTRIBUTE, ""));
  out = out.replace(IMAGE_ALT, "![](");
  out = out.replace(LINK_TITLE, "$1)");
  out = out.replace(REFERENCE_TITLE, "$1");
  return out.replace(/\n{3,}/g, "\n\n").trim();
}
