/**
 * A tiny HTTP server for processes without the gateway: `/healthz` answers while
 * the process lives, `/readyz` answers 200 only when every module is running.
 */
import { createServer } from "node:http";
import type { ModuleManager } from "./modules.ts";

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(manager: Pick<ModuleManager, "ready" | "states">, port: number, host = "0.0.0.0"): Promise<HealthServer> {
  const server = createServer((req, res) => {
    const body = (code: number, data: unknown) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(data));
    };
    if (req.url === "/healthz") return body(200, { status: "ok" });
    if (req.url === "/readyz") {
      const ready = manager.ready();
      return body(ready ? 200 : 503, { ready, modules: manager.states() });
    }
    body(404, { code: "BATON_NOT_FOUND" });
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
