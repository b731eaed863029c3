import { LinearClient } from "@linear/sdk";
import nock from "nock";
import { afterEach, describe, expect, it } from "vitest";
import { isTeamMember } from "../../src/integrations/linear/door.js";

/*
 * Team membership for Linear gate comments, page by page: Linear answers at most 250 members
 * a page, so a member of a larger team is on a later page. Linear's GraphQL endpoint is nock
 * at its HTTP boundary, answering the SDK's own team_members query with pageInfo cursors.
 */

const API = "https://linear.test";
const TEAM = "team-big";

interface GqlBody {
  query: string;
  variables: { id?: string; first?: number; after?: string };
}

const users = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ id: `user-${from + i}`, name: `U${from + i}` }));

/** One page of the team's members, asked for with `after` (undefined: the first page). */
function page(
  scope: nock.Scope,
  after: string | undefined,
  nodes: Array<{ id: string }>,
  next: string | null,
  seen: GqlBody[],
) {
  return scope
    .post("/graphql", (body: GqlBody) => {
      if (!/query team_members\b/.test(body.query)) return false;
      if (body.variables.id !== TEAM || body.variables.after !== after) return false;
      seen.push(body);
      return true;
    })
    .reply(200, {
      data: {
        team: {
          members: {
            nodes,
            pageInfo: { hasNextPage: next !== null, hasPreviousPage: false, endCursor: next },
          },
        },
      },
    });
}

const client = () =>
  new LinearClient({ apiKey: "lin_api_unit_0123456789", apiUrl: `${API}/graphql` });

afterEach(() => {
  nock.cleanAll();
});

describe("Linear team membership", () => {
  it("finds a member on the third page of a 520-member team", async () => {
    const seen: GqlBody[] = [];
    const scope = nock(API);
    page(scope, undefined, users(1, 250), "cursor-250", seen);
    page(scope, "cursor-250", users(251, 250), "cursor-500", seen);
    page(scope, "cursor-500", users(501, 20), null, seen);
    expect(await isTeamMember(client(), TEAM, "user-512")).toBe(true);
    expect(scope.isDone()).toBe(true);
    expect(seen.map((b) => [b.variables.first, b.variables.after])).toEqual([
      [250, undefined],
      [250, "cursor-250"],
      [250, "cursor-500"],
    ]);
  });

  it("stops at the page where the member is", async () => {
    const seen: GqlBody[] = [];
    const scope = nock(API);
    page(scope, undefined, users(1, 250), "cursor-250", seen);
    page(scope, "cursor-250", users(251, 250), "cursor-500", seen);
    expect(await isTeamMember(client(), TEAM, "user-17")).toBe(true);
    expect(seen).toHaveLength(1);
    expect(scope.pendingMocks()).toHaveLength(1);
  });

  it("answers false for someone on no page, after reading every page", async () => {
    const seen: GqlBody[] = [];
    const scope = nock(API);
    page(scope, undefined, users(1, 250), "cursor-250", seen);
    page(scope, "cursor-250", users(251, 3), null, seen);
    expect(await isTeamMember(client(), TEAM, "user-stranger")).toBe(false);
    expect(scope.isDone()).toBe(true);
  });
});
