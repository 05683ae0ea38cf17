/**
 * How a migration marked `-- baton:no-transaction` is cut into statements: each ends with `;` at
 * the end of a line (a comment may follow it), statements may span lines, comment and blank lines
 * are left out, CRLF files cut as LF ones, and a last statement without `;` is kept.
 */
import { describe, expect, it } from "@jest/globals";
import { migrationStatements } from "./migrate.ts";

describe("migrationStatements", () => {
  it("cuts at a semicolon ending a line, over several lines, without comments", () => {
    const sql = [
      "-- baton:no-transaction",
      "-- Why: writes go on during the build.",
      "",
      'DROP INDEX CONCURRENTLY IF EXISTS "ix";  -- a half-built one',
      'CREATE INDEX CONCURRENTLY "ix"',
      '  ON "t" ("a", "b");',
      "ANALYZE \"t\"",
    ].join("\r\n");
    expect(migrationStatements(sql)).toEqual([
      'DROP INDEX CONCURRENTLY IF EXISTS "ix";  -- a half-built one',
      'CREATE INDEX CONCURRENTLY "ix"\n  ON "t" ("a", "b");',
      'ANALYZE "t"',
    ]);
  });

  it("keeps a semicolon inside a line within its statement", () => {
    expect(migrationStatements("SELECT ';' AS x, 1\nFROM t;\n")).toEqual(["SELECT ';' AS x, 1\nFROM t;"]);
  });
});
