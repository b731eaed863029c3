/*
 * Declared dependencies of a repository, from its manifests at the root, as each registered
 * ecosystem reads them (src/ecosystems/<name>.ts, its `manifests` reader): package.json
 * (with package-lock.json for exact versions), requirements*.txt and pyproject.toml
 * (`[project] dependencies`, Poetry's tables), go.mod (direct requirements). Only reading,
 * never running.
 */
import { ECOSYSTEMS, type DependencyRegistry, type Manifests } from "../ecosystems/index.js";
import type { RepoFiles } from "./files.js";

export type { Dependency, Manifests } from "../ecosystems/index.js";
export { pep440Range, pep440ToSemver } from "../ecosystems/python.js";
/** The registry a dependency comes from. */
export type Ecosystem = DependencyRegistry;

/** The dependencies the repository declares at its root (`root`: the working copy). */
export async function readManifests(root: string, repo: RepoFiles): Promise<Manifests> {
  const out: Manifests = { dependencies: [], npmLocked: null, skipped: [] };
  for (const ecosystem of ECOSYSTEMS) await ecosystem.manifests?.read(root, repo, out);
  return out;
}
