/* Types for npm-pick-manifest (npm's own choice of a version from a packument; untyped). */
declare module "npm-pick-manifest" {
  interface PickOptions {
    defaultTag?: string;
    before?: string | Date | null;
    nodeVersion?: string;
    npmVersion?: string | null;
    includeStaged?: boolean;
  }
  interface PickedManifest {
    name?: string;
    version: string;
    [key: string]: unknown;
  }
  function pickManifest(packument: unknown, wanted: string, options?: PickOptions): PickedManifest;
  export = pickManifest;
}
