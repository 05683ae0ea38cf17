/** Runs the fixture MCP server over stdio: `node mcp-stdio-server.ts`. */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createFixtureServer } from "./mcp-tools.ts";

await createFixtureServer().connect(new StdioServerTransport());
