/*
 * What the planning model is shown about the repository before its first tool call: the
 * files that match the task best (with snippets), the repository's tree with the
 * directories of the likely files opened, and a map of the likely files' declarations.
 * One function, so the plan stage and the localisation benchmark (bench/localisation.ts)
 * see exactly the same thing.
 */
import type { RepoIndex, SearchHit } from "./index.js";
import { repoMap } from "./repo-map.js";

/** Pre-search hits shown with a snippet. */
export const PLANNING_HITS = 8;
/** Lines of the repository tree. */
export const PLANNING_TREE_LINES = 150;
/** Likely files in the map (the best hits, snippets or not). */
export const MAP_FILES = 30;
/** Characters of the map at most (about 3,000 tokens). */
export const MAP_CHARS = 12_000;

export interface PlanningContext {
  tree: string;
  hits: SearchHit[];
  /** Paths and declarations of the likely files, one path per line ("" when none). */
  map: string;
}

export function planningContext(index: RepoIndex, query: string): PlanningContext {
  const ranked = index.search(query, MAP_FILES);
  const paths = ranked.map((h) => h.path);
  return {
    tree: index.summary(PLANNING_TREE_LINES, paths),
    hits: ranked.slice(0, PLANNING_HITS),
    map: repoMap(index.root, paths, { maxChars: MAP_CHARS, maxLinesPerFile: 12 }),
  };
}
