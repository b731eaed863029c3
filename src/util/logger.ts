import { pino, type Logger, type LoggerOptions } from "pino";
import pretty from "pino-pretty";
import { redactDeep, redactText } from "./redact.js";

export type { Logger };

/**
 * The one logger factory. Redaction is applied here, centrally, so no call site has to
 * remember it: pino's path redaction for headers, and a scrub of every logged value.
 */
export function createLogger(
  options: {
    level?: string;
    destination?: pino.DestinationStream;
    /** LOG_FORMAT: one JSON object a line (default), or readable lines for development. */
    format?: "json" | "pretty";
  } = {},
): Logger {
  const config: LoggerOptions = {
    level: options.level ?? "info",
    base: { service: "foreman" },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'req.headers["x-api-key"]',
        "req.headers.authorization",
        "req.headers.cookie",
        'headers["x-api-key"]',
        "headers.authorization",
      ],
      censor: "[REDACTED]",
    },
    formatters: {
      log: (object) => redactDeep(object),
    },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((a) => (typeof a === "string" ? redactText(a) : a));
        return method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
    serializers: {
      err: (err: unknown) => redactDeep(pino.stdSerializers.err(err as Error)),
    },
  };
  if (options.destination) return pino(config, options.destination);
  // pino-pretty as a stream in this thread (not a transport worker): lines keep their order
  // with console output, and the redaction above has already run on what it prints.
  if (options.format === "pretty") return pino(config, pretty({ colorize: true, sync: true }));
  return pino(config);
}
