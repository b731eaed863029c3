import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import type { Principal } from "../../src/domain/accounts/keys.js";
import { route, type AnyRoute, type HandlerResult } from "../../src/http/route.js";
import { noContent } from "../../src/http/schemas.js";

/*
 * The route layer's typing (src/http/route.ts): a handler answers what its response schema
 * describes, and sees the principal its `auth` guarantees. Checked by `tsc --noEmit` (every
 * `@ts-expect-error` below must stay an error): if the typing is loosened again, drift between
 * a handler and its schema compiles, these directives become unused, and the check fails.
 */

const thing = z.object({
  id: z.string(),
  count: z.number().int(),
  tags: z.array(z.string()).default([]),
});

const base = {
  method: "get",
  path: "/things/:id",
  operationId: "getThing",
  summary: "One thing",
  tag: "things",
  status: 200,
} as const;

describe("route typing", () => {
  it("answers the response schema's output", () => {
    expectTypeOf<HandlerResult<typeof thing>>().toEqualTypeOf<{
      id: string;
      count: number;
      tags: string[];
    }>();
    expectTypeOf<HandlerResult<typeof noContent>>().toEqualTypeOf<void>();
    expectTypeOf<HandlerResult<undefined>>().toEqualTypeOf<void>();

    const ok = route({
      ...base,
      auth: "key",
      response: { description: "The thing", schema: thing },
      async handler() {
        return { id: "t1", count: 1, tags: [] };
      },
    });
    expect(ok.operationId).toBe("getThing");

    route({
      ...base,
      auth: "key",
      response: { description: "The thing", schema: thing },
      // @ts-expect-error `count` is a string, the schema says a number: drift is an error.
      async handler() {
        return { id: "t1", count: "1", tags: [] };
      },
    });

    route({
      ...base,
      auth: "key",
      response: { description: "The thing", schema: thing },
      // @ts-expect-error nothing fills in defaults on the way out: `tags` must be answered.
      async handler() {
        return { id: "t1", count: 1 };
      },
    });

    route({
      ...base,
      method: "delete",
      status: 204,
      auth: "key",
      response: { description: "Deleted", schema: noContent },
      // @ts-expect-error a 204 answers no body.
      async handler() {
        return { id: "t1" };
      },
    });
  });

  it("types paged lists' items and the Location of the answer", () => {
    route({
      ...base,
      operationId: "listThings",
      auth: "key",
      response: { description: "Things", schema: z.array(thing) },
      page: {
        key: (item) => {
          expectTypeOf(item).toEqualTypeOf<z.output<typeof thing>>();
          return [item.id];
        },
      },
      async handler() {
        return [{ id: "t1", count: 1, tags: [] }];
      },
    });

    route({
      ...base,
      method: "post",
      status: 201,
      auth: "key",
      response: { description: "The new thing", schema: thing },
      location: (created) => `/things/${created.id}`,
      async handler() {
        return { id: "t1", count: 1, tags: [] };
      },
    });

    route({
      ...base,
      method: "post",
      status: 201,
      auth: "key",
      response: { description: "The new thing", schema: thing },
      // @ts-expect-error `name` is no field of the answer.
      location: (created) => `/things/${created.name}`,
      async handler() {
        return { id: "t1", count: 1, tags: [] };
      },
    });
  });

  it("gives keyed routes a principal, also when collected as AnyRoute", () => {
    const routes: AnyRoute[] = [
      route({
        ...base,
        auth: "key",
        response: { description: "The thing", schema: thing },
        async handler(_ctx, { principal }) {
          expectTypeOf(principal).toEqualTypeOf<Principal>();
          return { id: principal.accountId, count: 1, tags: [] };
        },
      }),
      route({
        ...base,
        auth: "optional-key",
        response: { description: "The thing", schema: thing },
        async handler(_ctx, { principal }) {
          expectTypeOf(principal).toEqualTypeOf<Principal | undefined>();
          return { id: principal?.accountId ?? "anonymous", count: 1, tags: [] };
        },
      }),
      route({
        ...base,
        auth: "none",
        response: { description: "The thing", schema: thing },
        async handler(_ctx, { principal }) {
          expectTypeOf(principal).toEqualTypeOf<undefined>();
          return { id: "t1", count: 1, tags: [] };
        },
      }),
      route({
        ...base,
        auth: "key",
        response: { description: "The thing", schema: thing },
        // @ts-expect-error in an AnyRoute[] too, the answer is checked against the schema.
        async handler() {
          return { id: 1, count: 1, tags: [] };
        },
      }),
    ];
    expect(routes).toHaveLength(4);
  });
});
