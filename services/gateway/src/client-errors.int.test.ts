/**
 * Requests Node's HTTP parser refuses before fastify routes them, through a real `listen()` and
 * a raw socket (an HTTP client would not send them). Rules checked: a malformed header and
 * headers past Node's size limit are answered as problem+json with a stable code, like every
 * other error, not with fastify's default JSON of another shape.
 */
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "@jest/globals";
import type { TestGateway } from "./test-support.ts";
import { openTestGateway } from "./test-support.ts";

let gw: TestGateway;
let port: number;

beforeAll(async () => {
  gw = await openTestGateway();
  await gw.app.listen({ port: 0, host: "127.0.0.1" });
  port = (gw.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await gw.close();
});

/** Sends `raw` as it is and resolves with the status line, the headers and the body of the answer. */
function rawRequest(raw: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.end(raw));
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("error", () => undefined); // the server destroys the socket after answering
    socket.on("close", () => {
      const [head = "", body = ""] = text.split("\r\n\r\n");
      const [statusLine = "", ...lines] = head.split("\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1]);
      if (Number.isNaN(status)) return reject(new Error(`no HTTP answer: ${JSON.stringify(text)}`));
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
      resolve({ status, headers, body });
    });
  });
}

test("a malformed header is 400 problem+json BATON_GATEWAY_MALFORMED_REQUEST", async () => {
  const res = await rawRequest("GET /api/agent-workflows HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n");
  expect([res.status, res.headers["content-type"]]).toEqual([400, "application/problem+json"]);
  expect(JSON.parse(res.body)).toEqual({
    type: "urn:baton:error:BATON_GATEWAY_MALFORMED_REQUEST",
    title: "Bad Request",
    status: 400,
    detail: "the request is not valid HTTP (a malformed request line or header)",
    code: "BATON_GATEWAY_MALFORMED_REQUEST",
  });
});

test("headers past the server's limit are 431 problem+json BATON_GATEWAY_HEADERS_TOO_LARGE", async () => {
  const res = await rawRequest(`GET /api/agent-workflows HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(64 * 1024)}\r\n\r\n`);
  expect([res.status, res.headers["content-type"]]).toEqual([431, "application/problem+json"]);
  expect(JSON.parse(res.body)).toMatchObject({ status: 431, code: "BATON_GATEWAY_HEADERS_TOO_LARGE" });
});
