import { describe, expect, it } from "vitest";
import { withDatabaseName } from "../../src/db/connection.js";
import { socketPathOf, socketUri } from "../../src/db/embedded.js";
import { MongoServerError } from "mongodb";
import { isDatabaseBusy, isDatabaseOutage } from "../../src/errors.js";
import { toAppError } from "../../src/http/middleware/errors.js";

describe("Unix-socket connection strings", () => {
  it("round-trips a socket path and takes a database name", () => {
    const uri = socketUri("/tmp/foreman data/db/run/db.sock");
    expect(uri).toBe("mongodb://%2Ftmp%2Fforeman%20data%2Fdb%2Frun%2Fdb.sock/");
    expect(socketPathOf(uri)).toBe("/tmp/foreman data/db/run/db.sock");
    expect(withDatabaseName(uri, "foreman")).toBe(
      "mongodb://%2Ftmp%2Fforeman%20data%2Fdb%2Frun%2Fdb.sock/foreman",
    );
    expect(withDatabaseName(`${uri}other`, "foreman")).toBe(`${uri}other`);
    expect(socketPathOf("mongodb://127.0.0.1:27017/")).toBeUndefined();
  });
});

describe("database outages", () => {
  it("map to 503 upstream_unavailable with Retry-After, other errors stay 500", () => {
    for (const name of [
      "MongoServerSelectionError",
      "MongooseServerSelectionError",
      "MongoNetworkError",
      "MongoNotConnectedError",
    ]) {
      const error = Object.assign(new Error("connect ECONNREFUSED"), { name });
      expect(isDatabaseOutage(error)).toBe(true);
      const mapped = toAppError(error);
      expect(mapped).toMatchObject({ status: 503, code: "upstream_unavailable" });
      expect(Number(mapped.headers?.["Retry-After"])).toBeGreaterThan(0);
    }
    const wrapped = new Error("saving failed", {
      cause: Object.assign(new Error("x"), { name: "MongoNetworkError" }),
    });
    expect(toAppError(wrapped).status).toBe(503);
    const shutdown = Object.assign(new Error("shutting down"), {
      name: "MongoServerError",
      code: 91,
    });
    expect(toAppError(shutdown).status).toBe(503);
    const duplicate = Object.assign(new Error("E11000"), { name: "MongoServerError", code: 11000 });
    expect(toAppError(duplicate)).toMatchObject({ status: 500, code: "internal" });
    expect(toAppError(new Error("bug"))).toMatchObject({ status: 500, code: "internal" });
  });

  it("include a socket errno the driver rethrows unwrapped, but not the same errno elsewhere", () => {
    const driverFrame =
      "    at Connection.writeCommand (/srv/node_modules/mongodb/lib/cmap/connection.js:408:29)";
    const epipe = Object.assign(new Error("write EPIPE"), {
      code: "EPIPE",
      syscall: "write",
      stack: `Error: write EPIPE\n    at afterWriteDispatched (node:internal/stream_base_commons:161:15)\n${driverFrame}`,
    });
    expect(toAppError(epipe)).toMatchObject({ status: 503, code: "upstream_unavailable" });
    const elsewhere = Object.assign(new Error("write EPIPE"), {
      code: "EPIPE",
      stack: "Error: write EPIPE\n    at ChildProcess.write (/srv/dist/sandbox/index.js:1:1)",
    });
    expect(toAppError(elsewhere)).toMatchObject({ status: 500, code: "internal" });
  });

  it("a database too busy for one call (locked, no free connection) is 503 with Retry-After", () => {
    const busy = [
      // FerretDB v1 on SQLite: a write that found the database locked past its busy_timeout.
      new MongoServerError({
        errmsg:
          "[collection.go:129 sqlite.(*collection).InsertAll.func1] database is locked (5) (SQLITE_BUSY)",
        code: 1,
        codeName: "InternalError",
      }),
      new MongoServerError({ errmsg: "WriteConflict", code: 112, codeName: "WriteConflict" }),
      // The driver's pool had no free connection within waitQueueTimeoutMS.
      Object.assign(new Error("Timed out while checking out a connection from connection pool"), {
        name: "MongoWaitQueueTimeoutError",
      }),
    ];
    for (const error of busy) {
      expect(isDatabaseBusy(error), error.message).toBe(true);
      const mapped = toAppError(new Error("creating the task failed", { cause: error }));
      expect(mapped).toMatchObject({ status: 503, code: "upstream_unavailable" });
      expect(mapped.headers?.["Retry-After"]).toBe("1");
    }
    // Another internal error of the same server stays a 500: it is not known to pass.
    const other = new MongoServerError({ errmsg: "boom", code: 1, codeName: "InternalError" });
    expect(toAppError(other)).toMatchObject({ status: 500, code: "internal" });
  });
});
