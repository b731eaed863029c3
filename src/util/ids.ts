import { createHash, randomBytes } from "node:crypto";

/** Opaque, URL-safe, slash-free identifiers with a readable type prefix. */
export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomBytes(bytes).toString("base64url")}`;
}

export function sha256(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
