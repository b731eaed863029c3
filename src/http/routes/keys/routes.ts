import { z } from "zod";
import {
  createAccountWithKey,
  createKey,
  describeKey,
  listKeys,
  revokeKey,
  type KeyListing,
  type NewKey,
} from "../../../domain/accounts/keys.js";
import { errors } from "../../../errors.js";
import { consume } from "../../rate-limit.js";
import { route } from "../../route.js";
import { noContent } from "../../schemas.js";
import {
  generateKeyBody,
  keyListing,
  keyParams,
  keyUsage,
  listKeysQuery,
  newKey,
} from "./schema.js";

export const keyRoutes = [
  route({
    method: "post",
    path: "/keys/generate",
    operationId: "generateKey",
    tag: "keys",
    summary: "Create an API key",
    description:
      "Without X-API-Key: creates a new account on the free tier and its first key (open sign-up, rate-limited per client address: on by default only while the service listens on loopback (HOST); OPEN_SIGNUP=true/false decides when set; 403 when off). With a valid key: adds a key to that key's account, up to KEYS_PER_ACCOUNT unrevoked keys (409 `conflict` beyond: revoke one first). The key value is shown only in this response.",
    auth: "optional-key",
    body: generateKeyBody,
    status: 201,
    response: { description: "The new key", schema: newKey },
    errors: [403, 409, 429],
    location: (created: NewKey) => `/keys/${created.id}`,
    rateLimited: true,
    async handler(ctx, { body, principal, deps }) {
      if (principal)
        return createKey(deps.models, principal.accountId, body.name, deps.config.keysPerAccount);
      if (!deps.config.openSignup) {
        throw errors.forbidden(
          "Open sign-up is off on this server; ask an operator for a key (foreman-admin accounts create), or call with an existing key.",
        );
      }
      await consume(ctx, deps.limiters.signup, ctx.ip);
      const created = await createAccountWithKey(deps.models, body.name);
      deps.logger.info({ accountId: created.account_id, keyId: created.id }, "account created");
      return {
        id: created.id,
        key: created.key,
        name: created.name,
        created_at: created.created_at,
      };
    },
  }),
  route({
    method: "get",
    path: "/keys",
    operationId: "listKeys",
    tag: "keys",
    summary: "The keys of the caller's account, newest first",
    description:
      "Revoked keys included (`revoked_at` set). Shows each key's `prefix`, never its value. Paged (see Paging).",
    auth: "key",
    query: listKeysQuery,
    status: 200,
    response: { description: "Keys", schema: z.array(keyListing) },
    page: { key: (k: KeyListing) => [k.created_at, k.id] },
    async handler(_ctx, { principal, deps, page }) {
      return listKeys(deps.models, principal.accountId, page);
    },
  }),
  route({
    method: "get",
    path: "/keys/me",
    operationId: "getKeyUsage",
    tag: "keys",
    summary: "Usage of the calling key's account",
    auth: "key",
    status: 200,
    response: { description: "Tier and monthly usage", schema: keyUsage },
    async handler(_ctx, { principal, deps }) {
      return describeKey(deps.models, principal, deps.accountViews);
    },
  }),
  route({
    method: "delete",
    path: "/keys/:key_id",
    operationId: "revokeKey",
    tag: "keys",
    summary: "Revoke a key of the caller's account (itself included)",
    auth: "key",
    params: keyParams,
    status: 204,
    response: { description: "Revoked; the key answers 401 from now on", schema: noContent },
    errors: [404],
    async handler(_ctx, { params, principal, deps }) {
      await revokeKey(deps.models, principal.accountId, params.key_id);
    },
  }),
];
