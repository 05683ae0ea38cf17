/**
 * Rules checked against a real local HTTP server:
 * - the policy refuses loopback/private/metadata addresses by default, fast and with
 *   BATON_TOOL_HTTP_HOST_REFUSED naming the host and the reason; allowPrivate and
 *   allowPrivateHosts open them; allowHosts (exact and *.wildcard) limits names;
 * - every address a name resolves to is checked, and the connection goes to the checked
 *   address (the test names do not exist in system DNS, so a request only arrives when the
 *   pinned address is used);
 * - redirects are followed at most maxRedirects times and each target is checked again;
 * - timeouts, the response size cap (declared and streamed), gzip decoding, and the
 *   retryability of status errors (5xx yes, 4xx no).
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import zlib from "node:zlib";
import type { ToolContext, ToolSpec } from "@baton/sdk";
import { builtinTools, createHttpClient, nonPublicReason, policyFromEnv, type HttpPolicy, type ResolvedAddress } from "./index.ts";
import { toolContext } from "@baton/sdk/testing";

function context(signal: AbortSignal = new AbortController().signal): ToolContext {
  return toolContext({ signal });
}

function tool(policy: HttpPolicy, name = "http.request"): ToolSpec {
  const t = builtinTools({ http: policy }).find((s) => s.name === name);
  if (!t) throw new Error(`no ${name}`);
  return t;
}

async function call(policy: HttpPolicy, input: unknown, signal?: AbortSignal): Promise<unknown> {
  const t = tool(policy);
  return t.handler(t.input!.parse(input), context(signal));
}

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string; retryable: boolean; details?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; message: string; retryable: boolean };
  }
  throw new Error("expected a failure");
}

let server: http.Server;
let port: number;
const hits: string[] = [];
const hanging = new Set<http.ServerResponse>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    hits.push(url.pathname);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      switch (url.pathname) {
        case "/json":
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, n: 1 }));
          return;
        case "/echo":
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({ method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body: Buffer.concat(chunks).toString() }),
          );
          return;
        case "/redirect":
          res.writeHead(302, { location: url.searchParams.get("to") ?? "/json" }).end();
          return;
        case "/loop":
          res.writeHead(302, { location: "/loop" }).end();
          return;
        case "/hang":
          hanging.add(res);
          return;
        case "/big":
          res.writeHead(200, { "content-type": "text/plain", "content-length": String(64 * 1024) }).end("x".repeat(64 * 1024));
          return;
        case "/stream-big":
          res.writeHead(200, { "content-type": "text/plain" });
          for (let i = 0; i < 64; i++) res.write("y".repeat(1024));
          res.end();
          return;
        case "/gzip":
          res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" }).end(zlib.gzipSync(JSON.stringify({ zipped: true })));
          return;
        default: {
          const status = /^\/status\/(\d+)$/.exec(url.pathname);
          if (status) {
            res.writeHead(Number(status[1]), { "content-type": "text/plain", "retry-after": "2" }).end("status body");
            return;
          }
          res.writeHead(404).end("not found");
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const res of hanging) res.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** A resolver for names that exist only in the tests. */
function fakeDns(table: Record<string, string[]>, calls: string[] = []): (host: string) => Promise<ResolvedAddress[]> {
  return async (host) => {
    calls.push(host);
    const list = table[host];
    if (!list) throw Object.assign(new Error(`queryA ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    return list.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
}

describe("address checks", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["10.1.2.3", "private"],
    ["192.168.0.1", "private"],
    ["172.16.5.5", "private"],
    ["100.64.0.1", "carrier-grade NAT"],
    ["169.254.169.254", "cloud metadata"],
    ["169.254.1.1", "link-local"],
    ["224.0.0.1", "multicast"],
    ["0.0.0.0", "unspecified"],
    ["::1", "loopback"],
    ["fd12:3456::1", "unique-local"],
    ["fe80::1", "link-local"],
    ["::ffff:127.0.0.1", "loopback"],
    ["64:ff9b::a00:1", "private"],
  ])("%s is refused as %s", (address, reason) => {
    expect(nonPublicReason(address)).toContain(reason);
  });
  it.each(["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808"])("%s is public", (address) => {
    expect(nonPublicReason(address)).toBeUndefined();
  });
});

describe("policyFromEnv", () => {
  it("reads the allow-lists and the private switch", () => {
    expect(policyFromEnv({ BATON_HTTP_ALLOW_HOSTS: "api.example.com, *.corp.example", BATON_HTTP_ALLOW_PRIVATE: "true" })).toEqual({
      allowHosts: ["api.example.com", "*.corp.example"],
      allowPrivate: true,
      allowPrivateHosts: [],
    });
    expect(policyFromEnv({}).allowPrivate).toBe(false);
  });
  it("rejects a bad boolean and a bad host pattern with the policy code", () => {
    expect(() => policyFromEnv({ BATON_HTTP_ALLOW_PRIVATE: "yes" })).toThrow(expect.objectContaining({ code: "BATON_TOOL_HTTP_POLICY_INVALID" }));
    expect(() => policyFromEnv({ BATON_HTTP_ALLOW_HOSTS: "a..b" })).toThrow(expect.objectContaining({ code: "BATON_TOOL_HTTP_POLICY_INVALID" }));
  });
});

describe("http.request", () => {
  it("calls a local server when allowPrivate is set and parses JSON", async () => {
    const out = await call({ allowPrivate: true }, { method: "get", url: `http://127.0.0.1:${port}/json` });
    expect(out).toMatchObject({ status: 200, body: { ok: true, n: 1 } });
    expect((out as { headers: Record<string, string> }).headers["content-type"]).toBe("application/json");
  });

  it("refuses loopback by default without connecting, naming host and reason", async () => {
    const before = hits.length;
    const err = await failure(call({}, { method: "GET", url: `http://localhost:${port}/json` }));
    expect(err.code).toBe("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('"localhost"');
    expect(err.message).toContain("loopback address");
    expect(hits.length).toBe(before);
  });

  it("refuses the metadata address even with allowPrivate", async () => {
    const err = await failure(call({ allowPrivate: true }, { method: "GET", url: "http://169.254.169.254/latest/meta-data" }));
    expect(err.code).toBe("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(err.message).toContain("cloud metadata");
  });

  it("applies *.wildcard allow-lists and connects to the checked address only", async () => {
    const calls: string[] = [];
    const policy: HttpPolicy = {
      allowHosts: ["*.test.example"],
      allowPrivateHosts: ["api.test.example"],
      resolve: fakeDns({ "api.test.example": ["127.0.0.1"], "other.test.example": ["127.0.0.1"], "mixed.test.example": ["8.8.8.8", "10.0.0.5"] }, calls),
    };
    const ok = await call(policy, { method: "GET", url: `http://api.test.example:${port}/echo` });
    expect(ok).toMatchObject({ status: 200, body: { headers: { host: `api.test.example:${port}` } } });
    expect(calls).toEqual(["api.test.example"]);

    const notListed = await failure(call(policy, { method: "GET", url: `http://api.elsewhere.example:${port}/json` }));
    expect(notListed.code).toBe("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(notListed.message).toContain("not in the allow-list");
    expect(calls).toEqual(["api.test.example"]);

    const apex = await failure(call(policy, { method: "GET", url: `http://test.example:${port}/json` }));
    expect(apex.message).toContain("not in the allow-list");

    const loop = await failure(call(policy, { method: "GET", url: `http://other.test.example:${port}/json` }));
    expect(loop.message).toContain("loopback address 127.0.0.1");

    const mixed = await failure(call(policy, { method: "GET", url: `http://mixed.test.example:${port}/json` }));
    expect(mixed.message).toContain("private address 10.0.0.5");
  });

  it("follows redirects and re-checks each target", async () => {
    const policy: HttpPolicy = {
      allowPrivateHosts: ["api.test.example"],
      resolve: fakeDns({ "api.test.example": ["127.0.0.1"], "internal.test.example": ["127.0.0.1"] }),
    };
    const followed = await call(policy, { method: "GET", url: `http://api.test.example:${port}/redirect?to=/json` });
    expect(followed).toMatchObject({ status: 200, body: { ok: true } });

    const before = hits.length;
    const intoPrivate = await failure(
      call(policy, { method: "GET", url: `http://api.test.example:${port}/redirect?to=${encodeURIComponent(`http://internal.test.example:${port}/json`)}` }),
    );
    expect(intoPrivate.code).toBe("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(intoPrivate.message).toContain('"internal.test.example"');
    expect(hits.slice(before)).toEqual(["/redirect"]);

    const intoMetadata = await failure(
      call(policy, { method: "GET", url: `http://api.test.example:${port}/redirect?to=${encodeURIComponent("http://169.254.169.254/")}` }),
    );
    expect(intoMetadata.message).toContain("cloud metadata");

    const loop = await failure(call(policy, { method: "GET", url: `http://api.test.example:${port}/loop` }));
    expect(loop.code).toBe("BATON_TOOL_HTTP_REDIRECT");
    expect(loop.message).toContain("more than 5 redirects");
  });

  it("times out a response that never comes, as a retryable error", async () => {
    const err = await failure(call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/hang`, timeoutMs: 200 }));
    expect(err.code).toBe("BATON_TOOL_HTTP_TIMEOUT");
    expect(err.retryable).toBe(true);
  });

  it("rethrows the context's abort reason", async () => {
    const ac = new AbortController();
    const p = call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/hang` }, ac.signal);
    const reason = Object.assign(new Error("cancelled"), { code: "BATON_TOOL_CANCELLED", status: 409, retryable: false });
    setTimeout(() => ac.abort(reason), 50);
    expect(await failure(p)).toBe(reason);
  });

  it("caps the response size, declared or streamed", async () => {
    const policy = { allowPrivate: true, maxResponseBytes: 1024 };
    for (const path of ["/big", "/stream-big"]) {
      const err = await failure(call(policy, { method: "GET", url: `http://127.0.0.1:${port}${path}` }));
      expect(err.code).toBe("BATON_TOOL_HTTP_RESPONSE_TOO_LARGE");
    }
  });

  it("decodes gzip and drops the encoding headers", async () => {
    const out = (await call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/gzip` })) as { body: unknown; headers: Record<string, string> };
    expect(out.body).toEqual({ zipped: true });
    expect(out.headers["content-encoding"]).toBeUndefined();
  });

  it("fails 5xx as retryable and 4xx as not, unless failOnStatus is false", async () => {
    const five = await failure(call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/status/503` }));
    expect(five).toMatchObject({ code: "BATON_TOOL_HTTP_STATUS", retryable: true, retryDelayMs: 2000, details: { status: 503, body: "status body" } });
    const four = await failure(call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/status/404` }));
    expect(four).toMatchObject({ code: "BATON_TOOL_HTTP_STATUS", retryable: false });
    const kept = await call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/status/404`, failOnStatus: false });
    expect(kept).toMatchObject({ status: 404, body: "status body" });
  });

  it("sends JSON bodies and reports a refused connection as a retryable network error", async () => {
    const out = await call({ allowPrivate: true }, { method: "POST", url: `http://127.0.0.1:${port}/echo`, body: { a: 1 } });
    expect(out).toMatchObject({ body: { method: "POST", body: '{"a":1}', headers: { "content-type": "application/json" } } });

    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await failure(call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${deadPort}/` }));
    expect(err).toMatchObject({ code: "BATON_TOOL_HTTP_NETWORK_ERROR", retryable: true });
    expect(err.message).toContain("ECONNREFUSED");
  });

  it("reports a header value that cannot be sent as invalid input", async () => {
    const err = await failure(call({ allowPrivate: true }, { method: "GET", url: `http://127.0.0.1:${port}/json`, headers: { "x-a": "line\nbreak" } }));
    expect(err).toMatchObject({ code: "BATON_TOOL_INVALID_INPUT", retryable: false });
  });

  it("rejects non-http schemes in the input schema and in redirects", async () => {
    expect(tool({}).input!.safeParse({ method: "GET", url: "file:///etc/passwd" }).success).toBe(false);
    const client = createHttpClient({ allowPrivate: true });
    const err = await failure(client.request({ method: "GET", url: `http://127.0.0.1:${port}/redirect?to=${encodeURIComponent("file:///etc/passwd")}` }));
    expect(err.code).toBe("BATON_TOOL_HTTP_HOST_REFUSED");
    expect(err.message).toContain("scheme file:");
  });
});
