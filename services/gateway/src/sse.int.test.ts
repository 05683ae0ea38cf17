/**
 * Rules checked for GET /api/agent-workflow-executions/:id/events, through a real
 * `listen()` on port 0 and a real HTTP client:
 * - the answer is `text/event-stream`; every event is `id: <seq>`, `event: <type>`,
 *   `data: <json envelope>`;
 * - a client that connects late gets every earlier event replayed from the start, then the
 *   live ones; the server ends the response after a terminal event
 *   (execution.completed|failed|cancelled);
 * - `Last-Event-ID` resumes after that event, replaying from that event on (not from the run's
 *   first); a client that had the terminal event gets an empty stream that ends; a value that
 *   is not an id in decimal digits (`0x3`, `3e0`) replays from the first event; one past the
 *   last event of a run that had ended when the stream opened gets a stream that ends once
 *   idle (2 s), while a running run's stream waits; a stream from the first event of a run
 *   that ended moments ago waits longer (40 s) for the last events still owed;
 * - heartbeat comments keep an idle stream open;
 * - a client disconnect aborts the event source, and closing the app ends open streams;
 *   afterwards no stream is left following the execution;
 * - auth and tenant scoping apply: no key → 401, another tenant's execution → 404;
 * - HEAD answers the headers without opening a stream.
 */
import { request as httpRequest } from "node:http";
import type { IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "@jest/globals";
import { buildApp } from "./app.ts";
import type { TestGateway } from "./test-support.ts";
import { openTestGateway, validDefinition } from "./test-support.ts";

let gw: TestGateway;
let base: string;
let workflowId: number;

beforeAll(async () => {
  gw = await openTestGateway();
  await gw.app.listen({ port: 0, host: "127.0.0.1" });
  base = `http://127.0.0.1:${(gw.app.server.address() as AddressInfo).port}`;
  workflowId = (await gw.store.workflows.create(gw.a.tenantId, { name: "Streamed", definition: validDefinition() as never })).id;
});
afterAll(async () => {
  await gw.close();
});

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
}

/** Parses an event-stream body into its events (comments dropped). */
function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split("\n\n")) {
    const e: SseEvent = {};
    for (const line of block.split("\n")) {
      const m = /^(id|event|data): (.*)$/.exec(line);
      if (m) e[m[1] as keyof SseEvent] = m[2];
    }
    if (e.event !== undefined) out.push(e);
  }
  return out;
}

interface OpenStream {
  res: IncomingMessage;
  /** Everything received so far. */
  text(): string;
  /** Resolves with the whole body once the server ends the response. */
  ended: Promise<string>;
  /** Resolves once the received text matches. */
  waitFor(re: RegExp): Promise<void>;
  destroy(): void;
}

function openStream(path: string, headers: Record<string, string>, url = base): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { headers: { accept: "text/event-stream", ...headers } }, (res) => {
      let body = "";
      const watchers: { re: RegExp; resolve: () => void }[] = [];
      res.setEncoding("utf8");
      const ended = new Promise<string>((res2) => {
        res.on("end", () => res2(body));
        res.on("close", () => res2(body));
      });
      res.on("data", (chunk: string) => {
        body += chunk;
        for (const w of [...watchers]) {
          if (w.re.test(body)) {
            watchers.splice(watchers.indexOf(w), 1);
            w.resolve();
          }
        }
      });
      resolve({
        res,
        text: () => body,
        ended,
        waitFor: (re) =>
          new Promise<void>((r) => {
            if (re.test(body)) r();
            else watchers.push({ re, resolve: r });
          }),
        destroy: () => req.destroy(),
      });
    });
    req.on("error", reject);
    req.end();
  });
}

async function newExecution(): Promise<number> {
  return (await gw.store.executions.create(gw.a.tenantId, { workflowId, workflowVersion: 1, input: {} })).id;
}

const auth = () => ({ authorization: `Bearer ${gw.a.viewer}` });

describe("execution events over SSE", () => {
  test("a late client gets the replay, then live events, and the server ends after the terminal event", async () => {
    const id = await newExecution();
    gw.bus.emit(gw.a.tenantId, id, "execution.started", { id });
    gw.bus.emit(gw.a.tenantId, id, "node.started", { execution_id: id, node_id: "set", node_type: "setVariable" });

    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, auth());
    expect(s.res.statusCode).toBe(200);
    expect(s.res.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(s.res.headers["cache-control"]).toMatch(/no-cache/);
    await s.waitFor(/event: node\.started/);

    gw.bus.emit(gw.a.tenantId, id, "node.completed", { execution_id: id, node_id: "set", duration_ms: 1 });
    gw.bus.emit(gw.a.tenantId, id, "execution.completed", { id, status: "success" });
    // Emitted after the terminal event: must not be sent, the stream is over.
    gw.bus.emit(gw.a.tenantId, id, "node.started", { late: true });

    const body = await s.ended;
    const events = parseSse(body);
    expect(events.map((e) => [e.id, e.event])).toEqual([
      ["1", "execution.started"],
      ["2", "node.started"],
      ["3", "node.completed"],
      ["4", "execution.completed"],
    ]);
    expect(JSON.parse(events[1]!.data!)).toEqual({
      type: "node.started",
      seq: 2,
      time: expect.any(String),
      data: { execution_id: id, node_id: "set", node_type: "setVariable" },
    });
    await gw.bus.waitForNoStreams();
  });

  test("a run that already ended is replayed whole and the stream ends at once", async () => {
    const id = await newExecution();
    gw.bus.emit(gw.a.tenantId, id, "execution.started", { id });
    gw.bus.emit(gw.a.tenantId, id, "execution.failed", { id, error: { code: "X", message: "boom" } });
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, auth());
    const events = parseSse(await s.ended);
    expect(events.map((e) => e.event)).toEqual(["execution.started", "execution.failed"]);
    await gw.bus.waitForNoStreams();
  });

  test("Last-Event-ID resumes after that event", async () => {
    const id = await newExecution();
    for (const t of ["execution.started", "node.started", "node.completed", "execution.cancelled"]) gw.bus.emit(gw.a.tenantId, id, t, {});
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, { ...auth(), "last-event-id": "2" });
    expect(parseSse(await s.ended).map((e) => e.id)).toEqual(["3", "4"]);
    // The replay starts at that event, not at the run's first (a reconnect does not read the whole run again).
    expect(gw.bus.streams.filter((x) => x.executionId === id).map((x) => x.fromSeq)).toEqual([2]);
    // A client that had the terminal event already gets none, and its stream ends.
    const again = await openStream(`/api/agent-workflow-executions/${id}/events`, { ...auth(), "last-event-id": "4" });
    expect(parseSse(await again.ended)).toEqual([]);
  });

  test("a Last-Event-ID past the last event of a run that has ended gets a stream that ends; a running run's stream stays open", async () => {
    const id = await newExecution();
    for (const t of ["execution.started", "execution.completed"]) gw.bus.emit(gw.a.tenantId, id, t, {});
    await gw.store.executions.update(id, { status: "completed" });
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, { ...auth(), "last-event-id": "99999999" });
    expect(parseSse(await s.ended)).toEqual([]);
    await gw.bus.waitForNoStreams();
    // A run still going may yet have that many events: its stream waits for them.
    const live = await newExecution();
    await gw.store.executions.update(live, { status: "running" });
    const open = await openStream(`/api/agent-workflow-executions/${live}/events`, { ...auth(), "last-event-id": "99999999" });
    await new Promise((r) => setTimeout(r, 2_500));
    expect(open.res.complete).toBe(false);
    open.destroy();
    await gw.bus.waitForNoStreams();
  });

  test("a stream from the first event of a run that ended moments ago waits for its last events (owed after a crash)", async () => {
    const id = await newExecution();
    gw.bus.emit(gw.a.tenantId, id, "execution.started", {});
    // The row says completed, its events are not all out (an executor died between the two).
    await gw.store.executions.update(id, { status: "completed", completedAt: new Date() });
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, auth());
    await new Promise((r) => setTimeout(r, 2_500));
    expect(s.res.complete).toBe(false);
    gw.bus.emit(gw.a.tenantId, id, "execution.completed", {});
    expect(parseSse(await s.ended).map((e) => e.event)).toEqual(["execution.started", "execution.completed"]);
    await gw.bus.waitForNoStreams();
  });

  test("a Last-Event-ID that is not an event's id in decimal digits replays the run from its first event, skipping none", async () => {
    const id = await newExecution();
    for (const t of ["execution.started", "node.started", "node.completed", "execution.cancelled"]) gw.bus.emit(gw.a.tenantId, id, t, {});
    for (const header of ["0x3", "3e0", "+3", "3.0", "abc", "99999999999999999999"]) {
      const s = await openStream(`/api/agent-workflow-executions/${id}/events`, { ...auth(), "last-event-id": header });
      expect({ header, ids: parseSse(await s.ended).map((e) => e.id) }).toEqual({ header, ids: ["1", "2", "3", "4"] });
    }
  });

  test("a client that disconnects stops the event source", async () => {
    const id = await newExecution();
    gw.bus.emit(gw.a.tenantId, id, "execution.started", { id });
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, auth());
    await s.waitFor(/event: execution\.started/);
    await gw.bus.waitForStreams(1);
    s.destroy();
    await gw.bus.waitForNoStreams();
    expect(gw.bus.openStreams()).toBe(0);
  });

  test("heartbeat comments are sent while the run is idle; closing the app ends open streams", async () => {
    const app2 = await buildApp(gw.deps, { sseHeartbeatMs: 5 });
    await app2.listen({ port: 0, host: "127.0.0.1" });
    const url2 = `http://127.0.0.1:${(app2.server.address() as AddressInfo).port}`;
    const id = await newExecution();
    const s = await openStream(`/api/agent-workflow-executions/${id}/events`, auth(), url2);
    await s.waitFor(/: heartbeat/);
    await gw.bus.waitForStreams(1);
    await app2.close();
    await s.ended;
    await gw.bus.waitForNoStreams();
    expect(parseSse(s.text())).toEqual([]);
  });

  test("no key is 401; another tenant's execution is 404; a missing one is 404", async () => {
    const id = await newExecution();
    const noKey = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${id}/events` });
    expect(noKey.statusCode).toBe(401);
    const other = await gw.app.inject({ method: "GET", url: `/api/agent-workflow-executions/${id}/events`, headers: { "x-api-key": gw.b.admin } });
    expect(other.statusCode).toBe(404);
    expect(other.headers["content-type"]).toMatch(/^application\/problem\+json/);
    const missing = await gw.app.inject({ method: "GET", url: "/api/agent-workflow-executions/999999/events", headers: auth() });
    expect(missing.statusCode).toBe(404);
    const head = await gw.app.inject({ method: "HEAD", url: `/api/agent-workflow-executions/${id}/events`, headers: auth() });
    expect(head.statusCode).toBe(200);
    expect(head.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(gw.bus.openStreams()).toBe(0);
  });
});
