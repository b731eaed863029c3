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
    /**
     * LOG_FORMAT: `auto` (the default) writes readable lines when stdout is a terminal and one
     * JSON object a line otherwise (a file, a pipe, a log collector); `json` and `pretty` always.
     */
    format?: "auto" | "json" | "pretty";
    /** Whether stdout is a terminal, for `auto` (tests). */
    terminal?: boolean;
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
  const terminal = options.terminal ?? process.stdout.isTTY === true;
  if (options.format === "pretty" || ((options.format ?? "auto") === "auto" && terminal))
    return pino(config, prettyStream(terminal));
  return pino(config);
}

/** Readable lines: the time of day, the level, the message, then any fields below it. */
export function prettyStream(colorize: boolean): pino.DestinationStream {
  return pretty({
    colorize,
    sync: true,
    translateTime: "SYS:HH:MM:ss",
    ignore: "service",
  });
}
