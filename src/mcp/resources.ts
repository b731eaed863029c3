import { ResourceTemplate, type McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../domain/accounts/keys.js";
import { getTask } from "../domain/tasks/store.js";
import { readTrajectory } from "../domain/tasks/trajectories.js";
import { toTaskView } from "../domain/tasks/views.js";
import { AppError } from "../errors.js";
import type { McpDeps } from "./types.js";

/*
 * A task's plan, diff and trajectory as MCP resources (task://{id}/plan, ...). A foreign or
 * unknown task is the REST door's 404 `not_found`, as a JSON-RPC error whose `data` is the
 * REST error body.
 */

/** JSON-RPC code MCP uses for a resource that does not exist. */
const RESOURCE_NOT_FOUND = -32002;
const INTERNAL = -32603;

/** The REST error as a JSON-RPC error (the REST body in `data`). */
export function resourceError(error: AppError): McpError {
  const body = { error: { code: error.code, message: error.message } };
  return new McpError(error.status === 404 ? RESOURCE_NOT_FOUND : INTERNAL, error.message, body);
}

function idOf(variables: Record<string, string | string[]>): string {
  const id = variables.id;
  return (Array.isArray(id) ? id[0] : id) ?? "";
}

export function registerTaskResources(
  server: McpServer,
  deps: McpDeps,
  principal: () => Principal,
): void {
  const read = async (variables: Record<string, string | string[]>) => {
    try {
      return toTaskView(await getTask(deps.models, principal().accountId, idOf(variables)));
    } catch (error) {
      throw error instanceof AppError ? resourceError(error) : error;
    }
  };
  server.registerResource(
    "task-plan",
    new ResourceTemplate("task://{id}/plan", { list: undefined }),
    {
      title: "A task's plan",
      description:
        "The plan steps ({step, title, description, files}) and summary; null before PLANNING ends.",
      mimeType: "application/json",
    },
    async (uri, variables) => {
      const task = await read(variables);
      const text = JSON.stringify({ summary: task.plan_summary, steps: task.plan }, null, 2);
      return { contents: [{ uri: uri.href, mimeType: "application/json", text }] };
    },
  );
  server.registerResource(
    "task-diff",
    new ResourceTemplate("task://{id}/diff", { list: undefined }),
    {
      title: "A task's diff",
      description: "The unified diff of the task's changes; empty before REVIEWING.",
      mimeType: "text/x-diff",
    },
    async (uri, variables) => {
      const task = await read(variables);
      return { contents: [{ uri: uri.href, mimeType: "text/x-diff", text: task.diff ?? "" }] };
    },
  );
  server.registerResource(
    "task-trajectory",
    new ResourceTemplate("task://{id}/trajectory", { list: undefined }),
    {
      title: "A task's model transcript",
      description: "The model calls of the task as NDJSON (GET /tasks/{id}/trajectory).",
      mimeType: "application/x-ndjson",
    },
    async (uri, variables) => {
      try {
        const lines = await readTrajectory(
          deps.models,
          principal().accountId,
          idOf(variables),
          deps.config.trajectoryRetentionDays,
        );
        const text = lines.map((line) => JSON.stringify(line)).join("\n");
        return {
          contents: [
            { uri: uri.href, mimeType: "application/x-ndjson", text: text ? `${text}\n` : "" },
          ],
        };
      } catch (error) {
        throw error instanceof AppError ? resourceError(error) : error;
      }
    },
  );
}
