import type { Next } from "koa";
import { ZodError } from "zod";
import { AppError, errors, isAppError, isDatabaseBusy, isDatabaseOutage } from "../../errors.js";
import type { Logger } from "../../util/logger.js";
import { redactDeep, redactText } from "../../util/redact.js";
import type { AppContext } from "../types.js";
import { zodProblems } from "./validate.js";

interface HttpLikeError {
  status?: number;
  statusCode?: number;
  expose?: boolean;
  type?: string;
  message?: string;
  limit?: number;
}

/** Maps anything thrown below to an AppError; unknown failures become 500 `internal`. */
export function toAppError(error: unknown): AppError {
  if (isAppError(error)) return error;
  if (error instanceof ZodError) return errors.validation(zodProblems(error, "body"));
  // The database restarting or unreachable: a 503 to retry, not a 500 (docs/operations.md).
  if (isDatabaseOutage(error)) return errors.databaseUnavailable();
  // Up but too busy for this call (locked, no free connection): retry in a moment.
  if (isDatabaseBusy(error)) return errors.databaseBusy();
  const e = (error ?? {}) as HttpLikeError;
  const status = e.status ?? e.statusCode;
  if (e.type === "entity.too.large" || status === 413)
    return errors.payloadTooLarge(e.limit ?? 1024 * 1024);
  if (e.type === "encoding.unsupported" || status === 415) return errors.unsupportedMediaType();
  if (e.type === "request.aborted")
    return errors.validation([{ path: "body", message: "The request body was cut off." }]);
  if (status === 404) return errors.notFound("route");
  if (status === 405) return errors.methodNotAllowed();
  if (typeof status === "number" && status >= 400 && status < 500 && e.expose) {
    return new AppError(status, "validation_failed", redactText(e.message ?? "Bad request."));
  }
  return new AppError(500, "internal", "Something went wrong on our side; the failure was logged.");
}

/**
 * The error middleware: every error status answers with the one error body (docs/api.md,
 * "Errors"), never a stack trace or a secret. Routes that match nothing answer 404 `not_found`
 * in the same format.
 */
export function errorHandler(logger: Logger) {
  return async function handleErrors(ctx: AppContext, next: Next): Promise<void> {
    try {
      await next();
      if (ctx.respond !== false && ctx.body == null) {
        if (ctx.status === 404) throw errors.notFound("route");
        if (ctx.status === 405 || ctx.status === 501) throw errors.methodNotAllowed();
      }
    } catch (error) {
      const appError = toAppError(error);
      if (appError.code === "upstream_unavailable" && isDatabaseOutage(error)) {
        logger.warn(
          { err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId },
          "request failed: database unavailable",
        );
      } else if (appError.code === "upstream_unavailable" && isDatabaseBusy(error)) {
        logger.warn(
          { err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId },
          "request failed: database busy",
        );
      } else if (appError.status >= 500) {
        logger.error(
          { err: error, method: ctx.method, path: ctx.path, requestId: ctx.state.requestId },
          "request failed",
        );
      }
      ctx.status = appError.status;
      for (const [name, value] of Object.entries(appError.headers ?? {})) ctx.set(name, value);
      const body: { code: string; message: string; details?: unknown } = {
        code: appError.code,
        message: redactText(appError.message),
      };
      if (appError.details !== undefined) body.details = redactDeep(appError.details);
      ctx.body = { error: body };
    }
  };
}
