import nock from "nock";
import { afterAll } from "vitest";

/*
 * The setup of the test files that use nock (vitest.config.ts, project "nock"). Their
 * worker's modules are shared between them, so nock is loaded once: each file gets it active
 * here, as importing it would for a file of its own, and leaves nothing of it behind (no
 * interceptor, no refusal of the network, no listener, Node's http module as it was).
 */
if (!nock.isActive()) nock.activate();

afterAll(() => {
  nock.abortPendingRequests();
  nock.cleanAll();
  nock.enableNetConnect();
  nock.emitter.removeAllListeners();
  nock.restore();
});
