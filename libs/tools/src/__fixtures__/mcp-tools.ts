/** A tiny real MCP server for the tests: `echo`, `add`, `fail` (isError), `get-pid` and `crash` (exits the process). */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { EmptyResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

export function createFixtureServer(): McpServer {
  const server = new McpServer({ name: "baton-fixture", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echoes text.", inputSchema: { text: z.string() }, outputSchema: { echoed: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }], structuredContent: { echoed: text } }),
  );
  server.registerTool(
    "add",
    { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }, extra) => {
      const progressToken = extra._meta?.progressToken;
      if (progressToken !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: 1, total: 2, message: "half" } });
        // A ping round trip: the client has handled the notification before the result arrives
        // (the SDK client drops progress that it handles after the result).
        await extra.sendRequest({ method: "ping" }, EmptyResultSchema);
      }
      return { content: [{ type: "text", text: String(a + b) }] };
    },
  );
  server.registerTool(
    "fail",
    { description: "Always fails with isError.", inputSchema: { reason: z.string() } },
    async ({ reason }) => ({ isError: true, content: [{ type: "text", text: `refused: ${reason}` }] }),
  );
  server.registerTool("get-pid", { description: "The server's process id." }, async () => ({
    content: [{ type: "text", text: String(process.pid) }],
  }));
  server.registerTool("crash", { description: "Exits the server process without answering." }, async () => {
    process.exit(3);
  });
  return server;
}
