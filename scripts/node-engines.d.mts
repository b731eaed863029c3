/** Types of scripts/node-engines.mjs (a plain script: node runs it without a build). */
export interface InstalledEngines {
  name: string;
  range: string;
  folder: string;
}
export function installedEngines(modules?: string): InstalledEngines[];
export function excluding(declared: string, packages: InstalledEngines[]): InstalledEngines[];
export function lowestAccepted(packages: InstalledEngines[], floor?: string): string | undefined;
