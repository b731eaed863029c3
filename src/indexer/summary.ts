/*
 * A compact picture of a repository for a prompt: the directory tree with file counts.
 * Directories holding the `focus` files (the best search hits for the task) are opened
 * first, with those files listed whatever their place in the directory; the rest of the
 * line budget opens directories breadth-first, so the top levels show too. Opened
 * breadth-first alone, a tree spends its budget on many small directories and leaves the
 * large source directories, where the change usually is, collapsed.
 */

/** Files listed per directory before the rest is summed up as "… N more files". */
const FILES_PER_DIR = 15;

interface DirNode {
  name: string;
  dirs: Map<string, DirNode>;
  files: string[];
  total: number;
  expanded: boolean;
  /** Files listed whatever the per-directory limit (focus files). */
  pinned: Set<string>;
  parent: DirNode | undefined;
}

function newDir(name: string, parent?: DirNode): DirNode {
  return { name, dirs: new Map(), files: [], total: 0, expanded: false, pinned: new Set(), parent };
}

function buildTree(files: readonly string[]): DirNode {
  const root = newDir("");
  for (const file of files) {
    const parts = file.split("/");
    let node = root;
    node.total++;
    for (let i = 0; i < parts.length - 1; i++) {
      const name = parts[i]!;
      let child = node.dirs.get(name);
      if (child === undefined) {
        child = newDir(name, node);
        node.dirs.set(name, child);
      }
      child.total++;
      node = child;
    }
    node.files.push(parts[parts.length - 1]!);
  }
  return root;
}

function sortedDirs(node: DirNode): DirNode[] {
  return [...node.dirs.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function expansionCost(node: DirNode): number {
  const shown = Math.min(node.files.length, FILES_PER_DIR);
  return node.dirs.size + shown + (node.files.length > shown ? 1 : 0);
}

function findDir(root: DirNode, file: string): DirNode | undefined {
  const parts = file.split("/");
  let node: DirNode | undefined = root;
  for (let i = 0; i < parts.length - 1 && node !== undefined; i++) node = node.dirs.get(parts[i]!);
  return node;
}

/** Share of the budget the focus files may take, so the top levels still show. */
const FOCUS_SHARE = 0.6;

/**
 * Renders `files` (sorted relative paths) as an indented tree of at most about `maxEntries`
 * lines after `header`: directories as `name/ (N files)`, then up to 15 files each.
 */
export function summarizeTree(
  files: readonly string[],
  maxEntries: number,
  header: string,
  focus: readonly string[] = [],
): string {
  const root = buildTree(files);
  let budget = Math.max(1, maxEntries);
  root.expanded = true;
  budget -= expansionCost(root);
  // Focus files in rank order: open each one's directories (and pin the file) while it fits.
  let focusBudget = Math.floor(maxEntries * FOCUS_SHARE);
  for (const file of focus) {
    const dir = findDir(root, file);
    if (dir === undefined) continue;
    const name = file.slice(file.lastIndexOf("/") + 1);
    const closed: DirNode[] = [];
    for (let d: DirNode | undefined = dir; d !== undefined && !d.expanded; d = d.parent) {
      closed.push(d);
    }
    const cost = closed.reduce((sum, d) => sum + expansionCost(d), 0) + 1;
    if (cost > focusBudget || cost > budget) continue;
    for (const d of closed) d.expanded = true;
    if (!dir.pinned.has(name)) dir.pinned.add(name);
    focusBudget -= cost;
    budget -= cost;
  }
  const queue: DirNode[] = [root];
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head]!;
    if (!node.expanded) {
      const cost = expansionCost(node);
      // A directory that does not fit stays a one-line count.
      if (cost > budget) continue;
      node.expanded = true;
      budget -= cost;
    }
    queue.push(...sortedDirs(node));
  }
  const lines = [header];
  const rootFileLimit = Math.min(FILES_PER_DIR, Math.max(0, maxEntries - root.dirs.size));
  const render = (node: DirNode, indent: string): void => {
    // Files first: at the top level they are the telling ones (README, package.json).
    const limit = node === root ? rootFileLimit : FILES_PER_DIR;
    const shown = new Set(node.pinned);
    for (const file of node.files) {
      if (shown.size >= Math.max(limit, node.pinned.size)) break;
      shown.add(file);
    }
    for (const file of node.files) if (shown.has(file)) lines.push(`${indent}${file}`);
    if (node.files.length > shown.size) {
      lines.push(`${indent}… ${node.files.length - shown.size} more files`);
    }
    for (const dir of sortedDirs(node)) {
      lines.push(`${indent}${dir.name}/ (${dir.total} ${dir.total === 1 ? "file" : "files"})`);
      if (dir.expanded) render(dir, `${indent}  `);
    }
  };
  render(root, "");
  return lines.join("\n");
}
