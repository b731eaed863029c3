/*
 * A compact picture of a repository for a prompt: the directory tree with file counts,
 * expanded breadth-first until the line budget is spent, so the top levels always show.
 */

/** Files listed per directory before the rest is summed up as "… N more files". */
const FILES_PER_DIR = 15;

interface DirNode {
  name: string;
  dirs: Map<string, DirNode>;
  files: string[];
  total: number;
  expanded: boolean;
}

function newDir(name: string): DirNode {
  return { name, dirs: new Map(), files: [], total: 0, expanded: false };
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
        child = newDir(name);
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

/**
 * Renders `files` (sorted relative paths) as an indented tree of at most about `maxEntries`
 * lines after `header`: directories as `name/ (N files)`, then up to 15 files each.
 */
export function summarizeTree(
  files: readonly string[],
  maxEntries: number,
  header: string,
): string {
  const root = buildTree(files);
  let budget = Math.max(1, maxEntries);
  const queue: DirNode[] = [root];
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head]!;
    const cost = expansionCost(node);
    // The root is always opened; a directory that does not fit stays a one-line count.
    if (node !== root && cost > budget) continue;
    node.expanded = true;
    budget -= cost;
    queue.push(...sortedDirs(node));
  }
  const lines = [header];
  const rootFileLimit = Math.min(FILES_PER_DIR, Math.max(0, maxEntries - root.dirs.size));
  const render = (node: DirNode, indent: string): void => {
    // Files first: at the top level they are the telling ones (README, package.json).
    const limit = node === root ? rootFileLimit : FILES_PER_DIR;
    for (const file of node.files.slice(0, limit)) lines.push(`${indent}${file}`);
    if (node.files.length > limit) {
      lines.push(`${indent}… ${node.files.length - limit} more files`);
    }
    for (const dir of sortedDirs(node)) {
      lines.push(`${indent}${dir.name}/ (${dir.total} ${dir.total === 1 ? "file" : "files"})`);
      if (dir.expanded) render(dir, `${indent}  `);
    }
  };
  render(root, "");
  return lines.join("\n");
}
