import { readFileSync } from "node:fs";

/**
 * The service's one version number, from package.json: the OpenAPI and AsyncAPI documents'
 * `info.version`, the MCP door's server info and the MCP client's name for itself all read
 * it here (package.json is one folder above both src/ and dist/, and is copied into the image).
 */
export const SERVICE_VERSION: string = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  }
).version;
