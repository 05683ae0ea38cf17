/**
 * Rules checked (pure functions, no server):
 * - zod issue paths name the request part and keep indices apart from keys
 *   (`body.definition.nodes[2].type`); each unknown key is its own issue; a number past an
 *   integer field's own bound is one issue naming that bound (not zod's safe-integer one too);
 * - gateway and other Baton errors below 500 keep their status, code and message;
 *   Baton 503s keep their code (other libraries' text is replaced by a generic one);
 *   fastify's client errors keep their status; anything else is a generic 500
 *   (BATON_GATEWAY_INTERNAL) that never carries the original message;
 * - an SSE event is `id`, `event`, one `data` line, blank line;
 * - an embedded JSON Schema's `$defs` become sibling components and its refs are rewritten.
 */
import { describe, expect, test } from "@jest/globals";
import { z } from "zod";
import { defineError } from "@baton/errors";
import { NotFound, RequestInvalid } from "./errors.ts";
import { embedJsonSchema, pruneUnusedSchemas } from "./plugins/docs.ts";
import { formatPath, toProblem, zodIssuesToProblems } from "./problem.ts";
import { formatSseEvent } from "./sse.ts";

describe("zod issues → problem errors", () => {
  test("paths name the part, with indices in brackets", () => {
    expect(formatPath("body", ["definition", "nodes", 2, "type"])).toBe("body.definition.nodes[2].type");
    expect(formatPath("query", ["limit"])).toBe("query.limit");
    expect(formatPath("body", ["config", "a b"])).toBe('body.config["a b"]');
    expect(formatPath("body", [])).toBe("body");
  });

  test("every issue is kept; unknown keys become one issue each", () => {
    const schema = z.strictObject({ name: z.string().min(1), nodes: z.array(z.object({ type: z.string() })) });
    const r = schema.safeParse({ name: "", nodes: [{ type: "a" }, { type: 3 }], x: 1, y: 2 });
    expect(r.success).toBe(false);
    const issues = zodIssuesToProblems("body", r.error!.issues);
    expect(issues.map((i) => `${i.path} ${i.code}`).sort()).toEqual(
      ["body.name too_small", "body.nodes[1].type invalid_type", "body.x unrecognized_key", "body.y unrecognized_key"].sort(),
    );
  });
});

describe("zod issues → problem errors: integers", () => {
  test("a number past an integer field's own bound is one issue naming that bound, not also the safe-integer range", () => {
    const schema = z.strictObject({ deadlineMs: z.number().int().min(1).max(2_592_000_000), n: z.number().int() });
    const r = schema.safeParse({ deadlineMs: 1e20, n: 1e20 });
    expect(zodIssuesToProblems("body", r.error!.issues).map((i) => `${i.path} ${i.code} ${i.message}`)).toEqual([
      "body.deadlineMs too_big Too big: expected number to be <=2592000000",
      // A field with no bound of its own keeps the safe-integer one.
      "body.n too_big Too big: expected int to be <=9007199254740991",
    ]);
    const low = schema.safeParse({ deadlineMs: -1e20, n: 1 });
    expect(zodIssuesToProblems("body", low.error!.issues).map((i) => `${i.path} ${i.code}`)).toEqual(["body.deadlineMs too_small"]);
  });
});

describe("errors → problems", () => {
  test("a gateway 4xx keeps status, code, message and issue list", () => {
    const errors = [{ path: "body.a", code: "invalid_type", message: "nope" }];
    const { problem, internal } = toProblem(RequestInvalid("body", 1, { details: errors }));
    expect(internal).toBe(false);
    expect(problem).toMatchObject({ status: 400, code: "BATON_GATEWAY_REQUEST_INVALID", title: "Bad Request", errors });
    expect(toProblem(NotFound("workflow", 3)).problem).toMatchObject({ status: 404, detail: "workflow 3 not found" });
  });

  test("another library's 503 keeps its code but not its text", () => {
    const Down = defineError("BATON_STORE_UNAVAILABLE", (d: string) => `database unavailable: ${d}`, { status: 503 });
    const { problem } = toProblem(Down("connect ECONNREFUSED 10.0.0.5:5432"));
    expect(problem).toMatchObject({ status: 503, code: "BATON_STORE_UNAVAILABLE" });
    expect(problem.detail).not.toContain("10.0.0.5");
  });

  test("fastify client errors keep their status", () => {
    const err = Object.assign(new Error("Unsupported Media Type"), { statusCode: 415, code: "FST_ERR_CTP_INVALID_MEDIA_TYPE" });
    expect(toProblem(err).problem).toMatchObject({ status: 415, code: "FST_ERR_CTP_INVALID_MEDIA_TYPE" });
  });

  test("anything else is a generic 500 that hides the message", () => {
    for (const err of [new Error("password=hunter2"), "string thrown", null, Object.assign(new Error("x"), { status: 502, code: "BATON_X" })]) {
      const { problem, internal } = toProblem(err);
      expect(internal).toBe(true);
      expect(problem).toMatchObject({ status: 500, code: "BATON_GATEWAY_INTERNAL", detail: "internal server error" });
      expect(JSON.stringify(problem)).not.toContain("hunter2");
    }
  });
});

test("an SSE event is id, event, one data line and a blank line", () => {
  const text = formatSseEvent({ type: "node.started", seq: 7, time: "2030-01-01T00:00:00.000Z", data: { note: "two\nlines" } });
  expect(text).toBe(
    'id: 7\nevent: node.started\ndata: {"type":"node.started","seq":7,"time":"2030-01-01T00:00:00.000Z","data":{"note":"two\\nlines"}}\n\n',
  );
});

test("embedded JSON Schemas get their $defs as components and refs rewritten; unused components are pruned", () => {
  const components: Record<string, unknown> = { Unused: { type: "string" } };
  embedJsonSchema(components, "Def", {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { v: { $ref: "#/$defs/__schema0" } },
    $defs: { __schema0: { anyOf: [{ type: "string" }, { type: "array", items: { $ref: "#/$defs/__schema0" } }] } },
  });
  expect(components["Def"]).toEqual({ type: "object", properties: { v: { $ref: "#/components/schemas/Def___schema0" } } });
  expect(components["Def___schema0"]).toEqual({
    anyOf: [{ type: "string" }, { type: "array", items: { $ref: "#/components/schemas/Def___schema0" } }],
  });
  const doc = { paths: { "/x": { get: { schema: { $ref: "#/components/schemas/Def" } } } }, components: { schemas: components } };
  pruneUnusedSchemas(doc);
  expect(Object.keys(doc.components.schemas).sort()).toEqual(["Def", "Def___schema0"]);
});
