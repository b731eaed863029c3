import { constants as fsConstants } from "node:fs";
import { access } from "node:fs/promises";
import path from "node:path";

/**
 * The absolute path of an executable named `name` in the PATH's folders (relative ones are
 * skipped), then in `extraDirs`; undefined when none has it.
 */
export async function findExecutable(
  name: string,
  extraDirs: readonly string[] = [],
): Promise<string | undefined> {
  for (const dir of [...(process.env.PATH ?? "").split(":"), ...extraDirs]) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
