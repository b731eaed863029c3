import net from "node:net";
import type { AddressInfo } from "node:net";
import { socketPathOf } from "../../src/db/embedded.js";

/*
 * A TCP proxy between one worker process and the test database, to stop that worker at an
 * exact point of its work: the crash tests kill it while it is there. Rules look at what the
 * worker sends (MongoDB wire messages: the strings of a BSON document appear as their UTF-8
 * bytes): a `delay` rule holds a matching message (and what follows it on that connection) for
 * a while; a `drop` rule never forwards a matching message (its caller waits for ever); a
 * `pass` rule forwards it (to learn that it was sent); a `freeze` rule forwards it, then nothing
 * more in either direction, so the worker waits for a reply that never comes until the test
 * kills it.
 */

export interface ProxyRule {
  /** Every one of these strings is in one message the worker sends. */
  match: string[];
  action: "freeze" | "drop" | "pass" | { delayMs: number };
  /** Applied once, then dropped. */
  once?: boolean;
}

export interface DbProxy {
  /** A MONGODB_URI through the proxy, for database `name`. */
  uri(name: string): string;
  /** Adds a rule (rules are tried in order); resolves when it first matches. */
  rule(rule: ProxyRule): Promise<void>;
  /** Drops the freeze rules not matched yet. */
  clearFreezes(): void;
  /** Resolves once a freeze rule has matched. */
  frozen: Promise<void>;
  close(): Promise<void>;
}

/** Starts a proxy to the database server of `upstreamUri` on 127.0.0.1 and a free port. */
export async function startDbProxy(upstreamUri: string): Promise<DbProxy> {
  const socketPath = socketPathOf(upstreamUri);
  const upstream = socketPath
    ? { path: socketPath }
    : (() => {
        const url = new URL(upstreamUri);
        return { host: url.hostname, port: Number(url.port || 27017) };
      })();
  const rules: Array<ProxyRule & { matched(): void }> = [];
  const sockets = new Set<net.Socket>();
  let frozen = false;
  let onFrozen!: () => void;
  const frozenPromise = new Promise<void>((resolve) => (onFrozen = resolve));

  function matching(data: Buffer): ProxyRule | undefined {
    const index = rules.findIndex((rule) =>
      rule.match.every((text) => data.indexOf(Buffer.from(text, "utf8")) >= 0),
    );
    if (index < 0) return undefined;
    const rule = rules[index]!;
    if (rule.once) rules.splice(index, 1);
    rule.matched();
    return rule;
  }

  const server = net.createServer((client) => {
    const db = net.connect(upstream);
    sockets.add(client);
    sockets.add(db);
    // Chunks of the worker's side wait their turn here while a delay rule holds them.
    let queue: Promise<void> = Promise.resolve();
    client.on("data", (chunk: Buffer) => {
      queue = queue.then(async () => {
        if (frozen) return;
        // A driver connection sends one message at a time; the small ones the rules look
        // for come in one chunk.
        const rule = matching(chunk);
        if (rule?.action === "drop") return;
        if (rule && typeof rule.action === "object")
          await new Promise((r) => setTimeout(r, (rule.action as { delayMs: number }).delayMs));
        if (frozen) return;
        db.write(chunk);
        if (rule?.action === "freeze") {
          frozen = true;
          onFrozen();
        }
      });
    });
    db.on("data", (chunk: Buffer) => {
      if (!frozen) client.write(chunk);
    });
    const close = () => {
      client.destroy();
      db.destroy();
      sockets.delete(client);
      sockets.delete(db);
    };
    client.on("close", close);
    db.on("close", close);
    client.on("error", close);
    db.on("error", close);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    uri: (name) => `mongodb://127.0.0.1:${port}/${name}?directConnection=true`,
    rule: (rule) =>
      new Promise<void>((matched) => {
        rules.push({ ...rule, matched });
      }),
    clearFreezes() {
      for (let i = rules.length - 1; i >= 0; i--)
        if (rules[i]!.action === "freeze") rules.splice(i, 1);
    },
    frozen: frozenPromise,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
