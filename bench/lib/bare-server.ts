import http from "node:http";
import type { AddressInfo } from "node:net";

/** A bare HTTP server a benchmark compares the service with. */
export interface BareServer {
  url: string;
  /** Resolves once no request is in flight. */
  idle(): Promise<void>;
  /** Stops accepting, lets requests in flight finish (at most 5 s), then resolves. */
  close(): Promise<void>;
}

/**
 * Serves `handler` on 127.0.0.1 with the service's keep-alive settings. Requests the load
 * generator abandoned at the end of a run still finish here; they are counted, so the next
 * run (and the database's shutdown) starts only when they are done, as with the service.
 */
export async function serveBare(
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> | void,
  path: string,
): Promise<BareServer> {
  let inFlight = 0;
  let waiters: Array<() => void> = [];
  const settle = () => {
    inFlight -= 1;
    if (inFlight > 0) return;
    for (const wake of waiters) wake();
    waiters = [];
  };
  const server = http.createServer((req, res) => {
    inFlight += 1;
    res.once("close", settle);
    void handler(req, res);
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const idle = () =>
    inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve));
  return {
    url: `http://127.0.0.1:${port}${path}`,
    idle,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => void idle().then(resolve));
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5_000).unref();
      }),
  };
}
