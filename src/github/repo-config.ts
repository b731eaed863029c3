import type { InstallationOctokit } from "../github-api/client.js";
import { configNames } from "../verify/checks.js";
import { ownerAndRepo } from "./threads.js";
import { parseRepositoryYaml } from "../util/repo-parse.js";

/*
 * A repository's own config file (`.github/<APP_SLUG>.yml`, else `.github/foreman.yml`, on
 * the given ref, usually the default branch), read through GitHub's contents API. The first
 * file that exists is the config; YAML that does not parse counts as no config.
 */

/** The parsed config document, or null when there is none (or it is not YAML). */
export async function readRepoConfig(
  octokit: InstallationOctokit,
  fullName: string,
  ref: string,
  slug: string | undefined,
): Promise<Record<string, unknown> | null> {
  for (const path of configNames(slug)) {
    let text: string;
    try {
      const { data } = await octokit.rest.repos.getContent({
        ...ownerAndRepo(fullName),
        path,
        ref,
      });
      if (Array.isArray(data) || data.type !== "file" || !("content" in data)) continue;
      text = Buffer.from(data.content, "base64").toString("utf8");
    } catch (error) {
      if ((error as { status?: number }).status === 404) continue;
      throw error;
    }
    try {
      const doc: unknown = await parseRepositoryYaml(text);
      return doc && typeof doc === "object" && !Array.isArray(doc)
        ? (doc as Record<string, unknown>)
        : null;
    } catch {
      return null;
    }
  }
  return null;
}
