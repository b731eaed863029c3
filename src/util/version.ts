import { readFileSync } from "node:fs";
import semver from "semver";

/** package.json: one folder above both src/ and dist/, and copied into the image. */
const manifest = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
) as {
  version: string;
  engines: { node: string };
};

/**
 * The service's one version number, package.json's: the OpenAPI and AsyncAPI documents'
 * `info.version`, the MCP door's server info and the MCP client's name for itself all read it.
 */
export const SERVICE_VERSION: string = manifest.version;

/** The Node versions the service supports: package.json's `engines.node`. */
export const SUPPORTED_NODE: string = manifest.engines.node;

/** The start-up warning for a Node outside SUPPORTED_NODE, or undefined on a supported one. */
export function nodeRuntimeWarning(version: string = process.version): string | undefined {
  if (semver.satisfies(version, SUPPORTED_NODE)) return undefined;
  return (
    `Node ${version} is not supported (engines.node "${SUPPORTED_NODE}"): run \`bash scripts/setup.sh\`, ` +
    "which installs Node 22 for `npm start` where the machine's is older, or install Node 22 LTS or newer."
  );
}
