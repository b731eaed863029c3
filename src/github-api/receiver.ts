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
