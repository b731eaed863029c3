import type { Next } from "koa";
import { AppError, DATABASE_RETRY_AFTER_S } from "../../errors.js";
import type { AppContext } from "../types.js";

/*
 * Every request is answered within HTTP_HANDLER_TIMEOUT_S. A handler waiting on something that
 * does not answer (a database command written just as the server died can wait forever in
 * the mongodb driver, see db/connection.ts) gets 503 upstream_unavailable with Retry-After
 * instead of holding the client's connection. The late handler runs on; whatever it does
 * afterwards is dropped (the response is already sent) and a failure of it is logged. A
 * request whose body has not all arrived by then is the client's: 408 request_timeout.
 */
export function handlerDeadline(
  timeoutMs: number,
  onLateFailure: (error: unknown, ctx: AppContext) => void,
) {
  return async function deadline(ctx: AppContext, next: Next): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    // Handlers that wait on something (a repeat of an idempotent request) stop before this.
    ctx.state.deadline = Date.now() + timeoutMs;
    const handled = next();
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        handled.catch((error: unknown) => onLateFailure(error, ctx));
        // Still waiting for the body the client announced (a Content-Length it did not keep):
        // the client's fault, not a service's, so 408 and the connection closed.
        if (!ctx.req.complete) {
          ctx.set("Connection", "close");
          reject(
            new AppError(
              408,
              "request_timeout",
              `The request's body did not arrive within ${Math.round(timeoutMs / 1000)} seconds: send the whole body its Content-Length announces.`,
            ),
          );
          return;
        }
        reject(
          new AppError(
            503,
            "upstream_unavailable",
            `The request did not finish within ${Math.round(timeoutMs / 1000)} seconds: a service it needs is not answering. Retry in ${DATABASE_RETRY_AFTER_S} seconds.`,
            undefined,
            { "Retry-After": String(DATABASE_RETRY_AFTER_S) },
          ),
        );
      }, timeoutMs);
      timer.unref();
    });
    try {
      await Promise.race([handled, expired]);
    } finally {
      clearTimeout(timer);
    }
  };
}
