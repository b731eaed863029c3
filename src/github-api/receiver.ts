import { errors } from "../errors.js";

/**
 * What the HTTP door hands a GitHub webhook delivery to (github/receiver.ts implements it;
 * service.ts wires one into the other, so neither door imports the other).
 */
export interface GithubReceiver {
  receive(delivery: {
    id: string;
    name: string;
    signature: string;
    rawBody: string;
  }): Promise<"accepted" | "duplicate">;
}

/** The receiver of a server without a GitHub App: the webhook path is not a route (404). */
export const noGithubApp: GithubReceiver = {
  receive() {
    return Promise.reject(
      errors.notFound("route (the GitHub App is not configured on this server)"),
    );
  },
};
