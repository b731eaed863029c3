import type { Script } from "./agent-model.js";

/**
 * A model whose change only writes a `fixed` marker file (and never fixes anything in a fix
 * round): for tests about what the repository's checks do around a change, not the change.
 */
export const MARK_FIXED_SCRIPT: Script = {
  plan: () => [
    {
      name: "submit_plan",
      arguments: {
        summary: "Mark it fixed.",
        steps: [{ title: "Mark", description: "Add the marker.", files: ["fixed"] }],
      },
    },
  ],
  implement: (_request, n) =>
    n > 0
      ? [{ name: "finish", arguments: { summary: "Marked." } }]
      : [{ name: "write_file", arguments: { path: "fixed", content: "yes\n" } }],
  fix: () => [{ name: "finish", arguments: { summary: "Nothing to fix." } }],
};
