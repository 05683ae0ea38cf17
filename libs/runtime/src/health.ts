/**
 * A tiny HTTP server for processes without the gateway: `/healthz` answers while
 * the process lives, `/readyz` answers 200 only when every module is running (503 with
 * each module's state otherwise). GET and HEAD, with or without a query string; other
 * methods are 405, other paths 404.
 */
import { createServer } from "node:http";
import type { ModuleManager } from "./modules.ts";

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(manager: Pick<ModuleManager, "ready" | "states">, port: number, host = "0.0.0.0"): Promise<HealthServer> {
  const server = createServer((req, res) => {
    const body = (code: number, data: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(code, { "content-type": "application/json", ...headers });
      res.end(req.method === "HEAD" ? undefined : JSON.stringify(data));
    };
    // The path alone: probes may add a query string (cache busting, a probe's own marker).
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path !== "/healthz" && path !== "/readyz") return body(404, { code: "BATON_NOT_FOUND", detail: `no route ${path}; try /healthz or /readyz` });
    if (req.method !== "GET" && req.method !== "HEAD") return body(405, { code: "BATON_METHOD_NOT_ALLOWED", detail: `${path} answers GET and HEAD` }, { allow: "GET, HEAD" });
    if (path === "/healthz") return body(200, { status: "ok" });
    const ready = manager.ready();
    body(ready ? 200 : 503, { ready, modules: manager.states() });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return {
    port: typeof addr === "object" && addr ? addr.port : port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
