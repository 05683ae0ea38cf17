/**
 * Rules of the error mapping (shapes as Prisma 7 with @prisma/adapter-pg and `pg` throw them):
 * unique violations are 409 (or the caller's specific error), missing references and
 * missing rows 404, serialization failures and deadlocks retryable 409, unreachable or
 * shutting-down servers retryable 503, missing tables "not migrated", bad values 400,
 * anything else a non-retryable 500; Baton errors pass through untouched.
 */
import { describe, expect, it } from "@jest/globals";
import { SlugTaken, StoreNotFound } from "./errors.ts";
import { toStoreError } from "./db-errors.ts";

const prismaError = (code: string, cause?: Record<string, unknown>) =>
  Object.assign(new Error("Invalid `prisma.x()` invocation:\n\nsomething"), {
    name: "PrismaClientKnownRequestError",
    code,
    meta: cause ? { driverAdapterError: { name: "DriverAdapterError", cause } } : {},
  });
const pgError = (code: string) => Object.assign(new Error("pg says no"), { name: "error", code });

describe("toStoreError", () => {
  it("maps unique violations to 409, or to the caller's error", () => {
    const err = prismaError("P2002", { kind: "UniqueConstraintViolation", originalCode: "23505", constraint: { index: "agent_workflows_tenantId_slug_key" } });
    expect(toStoreError(err)).toMatchObject({ code: "BATON_STORE_CONFLICT", status: 409 });
    expect(toStoreError(err, { onUnique: (c) => (c.includes("slug") ? SlugTaken("s") : undefined) })).toMatchObject({ code: "BATON_STORE_SLUG_TAKEN" });
    expect(toStoreError(pgError("23505"))).toMatchObject({ code: "BATON_STORE_CONFLICT" });
  });

  it("maps missing references and rows to 404", () => {
    expect(toStoreError(prismaError("P2003"), { entity: "workflow", id: 7 })).toMatchObject({ code: "BATON_STORE_NOT_FOUND", status: 404, message: "workflow 7 not found" });
    expect(toStoreError(prismaError("P2025"), { entity: "execution", id: 9 })).toMatchObject({ code: "BATON_STORE_NOT_FOUND" });
  });

  it("maps transaction collisions to a retryable conflict", () => {
    expect(toStoreError(prismaError("P2034"))).toMatchObject({ code: "BATON_STORE_TX_CONFLICT", retryable: true });
    expect(toStoreError(pgError("40P01"))).toMatchObject({ code: "BATON_STORE_TX_CONFLICT", retryable: true });
  });

  it("maps unreachable and shutting-down servers to a retryable 503", () => {
    for (const err of [
      prismaError("P1001", { kind: "DatabaseNotReachable", host: "h", port: 1 }),
      prismaError("P2010", { kind: "DatabaseNotReachable" }),
      prismaError("P2037", { kind: "TooManyConnections" }),
      Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }),
      pgError("57P01"),
      pgError("08006"),
      new Error("Connection terminated unexpectedly"),
      Object.assign(new Error("init"), { name: "PrismaClientInitializationError" }),
    ]) {
      expect(toStoreError(err)).toMatchObject({ code: "BATON_STORE_UNAVAILABLE", status: 503, retryable: true });
    }
  });

  it("says why the server cannot be used in its own words, with the code", () => {
    const missing = Object.assign(new Error('database "baton" does not exist'), { name: "error", code: "3D000" });
    expect(toStoreError(missing).message).toBe('database unavailable: database "baton" does not exist (3D000)');
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    expect(toStoreError(refused).message).toBe("database unavailable: connect ECONNREFUSED 127.0.0.1:1");
    const prisma = prismaError("P1001", { kind: "DatabaseNotReachable", originalMessage: "Can't reach database server at h:1" });
    expect(toStoreError(prisma).message).toBe("database unavailable: Can't reach database server at h:1 (DatabaseNotReachable)");
  });

  it("reports missing tables as an unmigrated schema and bad values as 400", () => {
    expect(toStoreError(prismaError("P2021", { kind: "TableDoesNotExist", originalCode: "42P01" }))).toMatchObject({ code: "BATON_STORE_SCHEMA_NOT_MIGRATED" });
    expect(toStoreError(prismaError("P2039", { kind: "postgres", originalCode: "23514", originalMessage: "violates check constraint" }))).toMatchObject({
      code: "BATON_STORE_INVALID_INPUT",
      status: 400,
    });
    expect(toStoreError(Object.assign(new Error("Argument `x` is missing."), { name: "PrismaClientValidationError" }))).toMatchObject({ code: "BATON_STORE_INVALID_INPUT" });
  });

  it("passes Baton errors through and makes anything else a non-retryable 500", () => {
    const own = StoreNotFound("workflow", 1);
    expect(toStoreError(own)).toBe(own);
    const other = toStoreError(new Error("Invalid `prisma.x()` invocation:\n\nweird"));
    expect(other).toMatchObject({ code: "BATON_STORE_QUERY_FAILED", status: 500, retryable: false, message: "database query failed: weird" });
    expect(other.cause).toBeInstanceOf(Error);
  });
});
