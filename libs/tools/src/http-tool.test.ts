/**
 * Rules: an HTTP tool declaration is validated with clear `path: message` problems
 * (BATON_TOOL_HTTP_DECLARATION_INVALID); the tool fills `{param}` placeholders (URL-encoded
 * in the URL), sends `query` fields as query parameters and the rest of the input (or a
 * body template) as JSON, through the same guarded client as http.request.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { ToolContext } from "@baton/sdk";
import { httpTool, httpToolDeclarationSchema, type HttpToolDeclaration } from "./index.ts";
import { toolContext } from "@baton/sdk/testing";

const ctx: ToolContext = toolContext();

let server: http.Server;
let port: number;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://x");
      const text = Buffer.concat(chunks).toString();
      res.writeHead(url.pathname.endsWith("/missing") ? 404 : 200, { "content-type": "application/json" }).end(
        JSON.stringify({ method: req.method, path: url.pathname, query: url.search, auth: req.headers.authorization ?? null, body: text ? (JSON.parse(text) as unknown) : null }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function declaration(over: Partial<HttpToolDeclaration> = {}): HttpToolDeclaration {
  return {
    name: "crm.notes.create",
    description: "Adds a note to a customer.",
    method: "post",
    url: `http://127.0.0.1:${port}/customers/{id}/notes?lang={lang}`,
    headers: { authorization: "Bearer {token}" },
    query: ["tags"],
    body: "input",
    inputSchema: {
      type: "object",
      properties: { id: { type: "string" }, lang: { type: "string" }, token: { type: "string" }, tags: { type: "array" }, text: { type: "string" } },
      required: ["id", "text"],
    },
    ...over,
  };
}

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect((err as { code: string }).code).toBe("BATON_TOOL_HTTP_DECLARATION_INVALID");
    return (err as { details: string[] }).details;
  }
  throw new Error("expected the declaration to be refused");
}

describe("httpToolDeclarationSchema", () => {
  it("accepts a full declaration", () => {
    expect(httpToolDeclarationSchema.safeParse(declaration()).success).toBe(true);
  });

  it("names every problem with its path", () => {
    const problems = problemsOf(() =>
      httpTool({
        ...declaration({ name: "bad name!", url: "http://{host}.example.com/x/{nope}", query: ["tags", "ghost"] }),
        extra: true,
      } as HttpToolDeclaration),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^name: tool names are dot-separated words/),
        expect.stringMatching(/^url: placeholders are allowed in the path and query only/),
        "url: placeholder {nope} is not a property of inputSchema",
        'query[1]: "ghost" is not a property of inputSchema',
        expect.stringMatching(/extra/),
      ]),
    );
  });

  it("requires an http(s) URL and an object input schema", () => {
    const problems = problemsOf(() => httpTool(declaration({ url: "ftp://example.com/{id}", inputSchema: { type: "string" } })));
    expect(problems).toEqual(expect.arrayContaining(["url: url must use http or https", 'inputSchema: inputSchema must describe an object (type: "object")']));
  });
});

describe("httpTool", () => {
  it("fills placeholders, query and body, and returns the response body", async () => {
    const tool = httpTool(declaration(), { allowPrivate: true });
    expect(tool.name).toBe("crm.notes.create");
    expect(tool.inputJsonSchema).toMatchObject({ required: ["id", "text"] });
    const out = await tool.handler({ id: "a/b 1", lang: "en", token: "s3cret", tags: ["x", "y"], text: "hello" }, ctx);
    expect(out).toEqual({
      method: "POST",
      path: "/customers/a%2Fb%201/notes",
      query: "?lang=en&tags=x&tags=y",
      auth: "Bearer s3cret",
      body: { token: "s3cret", text: "hello" },
    });
  });

  it("uses a body template and can return the whole response", async () => {
    const tool = httpTool(
      declaration({ body: { note: { text: "{text}", count: "{n}" }, label: "id {id}" }, output: "response", headers: {} }),
      { allowPrivate: true },
    );
    const out = await tool.handler({ id: "7", lang: "de", text: "hi", n: 3 }, ctx);
    expect(out).toMatchObject({ status: 200, body: { body: { note: { text: "hi", count: 3 }, label: "id 7" } } });
  });

  it("refuses a missing placeholder value and a 4xx answer, not retryable", async () => {
    const tool = httpTool(declaration({ headers: {} }), { allowPrivate: true });
    await expect(tool.handler({ text: "no id" }, ctx)).rejects.toMatchObject({ code: "BATON_TOOL_INVALID_INPUT", retryable: false });
    const missing = httpTool(declaration({ url: `http://127.0.0.1:${port}/x/{id}/missing`, headers: {} }), { allowPrivate: true });
    await expect(missing.handler({ id: "1", text: "t" }, ctx)).rejects.toMatchObject({ code: "BATON_TOOL_HTTP_STATUS", retryable: false });
  });

  it("goes through the HTTP policy: loopback is refused by default", async () => {
    const tool = httpTool(declaration({ headers: {} }));
    await expect(tool.handler({ id: "1", lang: "en", text: "t" }, ctx)).rejects.toMatchObject({ code: "BATON_TOOL_HTTP_HOST_REFUSED" });
  });
});
