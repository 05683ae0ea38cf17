/**
 * Rules checked: /healthz answers 200 while the server runs; /readyz answers 200 only when the
 * manager is ready, 503 with the modules' states otherwise; a query string does not change the
 * route; HEAD answers without a body; other methods are 405 with `Allow`; other paths are 404.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startHealthServer } from "./health.ts";
import type { HealthServer } from "./health.ts";

let ready = false;
let server: HealthServer;
const url = (path: string): string => `http://127.0.0.1:${server.port}${path}`;

beforeAll(async () => {
  server = await startHealthServer({ ready: () => ready, states: () => ({ bus: ready ? "running" : "starting" }) }, 0, "127.0.0.1");
});
afterAll(async () => {
  await server.close();
});

describe("the health server", () => {
  it("answers /healthz at once and /readyz by the modules' state", async () => {
    expect(await (await fetch(url("/healthz"))).json()).toEqual({ status: "ok" });
    const notReady = await fetch(url("/readyz"));
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({ ready: false, modules: { bus: "starting" } });
    ready = true;
    const isReady = await fetch(url("/readyz"));
    expect(isReady.status).toBe(200);
    expect(await isReady.json()).toEqual({ ready: true, modules: { bus: "running" } });
  });

  it("routes by the path alone: a query string does not make it 404", async () => {
    expect((await fetch(url("/healthz?probe=kubelet"))).status).toBe(200);
    ready = false;
    expect((await fetch(url("/readyz?t=1"))).status).toBe(503);
  });

  it("answers HEAD without a body, other methods with 405, other paths with 404", async () => {
    const head = await fetch(url("/healthz"), { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    const post = await fetch(url("/healthz"), { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    expect(await post.json()).toMatchObject({ code: "BATON_METHOD_NOT_ALLOWED" });
    const other = await fetch(url("/metrics"));
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ code: "BATON_NOT_FOUND" });
  });
});
