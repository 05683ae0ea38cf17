/**
 * `/api/tool-sources`: tools declared without code. An HTTP tool declaration or an MCP
 * server configuration is stored in the tool source store (NATS KV); the built-in worker
 * watches it and serves the tools, writing each source's status (`ready` with its tool
 * names, or `failed` with the error) next to it.
 *
 * Tenant-scoped: a source belongs to the caller's tenant and its tools are listed for, and
 * callable by, that tenant only; other tenants' sources read as 404. Names are global
 * (tool names are): a name another tenant's source, or a tool written in code, uses is 409.
 * An MCP server with the stdio transport runs a command on the worker's host, so only the
 * admin role may register one. Header and environment values, which often hold secrets,
 * are never sent back.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { JsonObject, StoredToolSource, ToolSourceKind, ToolSourceStore } from "@baton/sdk";
import { HTTP_TOOL_METHODS, httpToolDeclarationSchema, mcpServerConfigSchema } from "@baton/tools";
import type { GatewayDeps } from "../deps.ts";
import { NotFound, RequestInvalid, StdioSourceForbidden, ToolSourceNameTaken, ToolSourcesUnavailable } from "../errors.ts";
import type { Issue } from "../problem.ts";
import { problemSchema, zodIssuesToProblems } from "../problem.ts";
import { API_SECURITY, TAGS } from "../schemas.ts";
import { apiErrors } from "./common.ts";

export interface ToolSourcesPluginOptions {
  deps: GatewayDeps;
}

const NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const REDACTED = "<redacted>";

/**
 * Request bodies as OpenAPI documents them: `@baton/tools`' own schemas, which the handlers run
 * (all problems at once). Only what JSON Schema cannot say is told in words: the method is
 * read case-insensitively, and the cross-field checks (placeholders, the URL's scheme and host).
 * Fields that hold any JSON are documented as such: the transform cannot place the shared
 * definition of a JSON value that zod's recursive `z.json()` makes.
 */
const declarationShape = httpToolDeclarationSchema.shape;
const httpDeclarationBody = z
  .strictObject({
    ...declarationShape,
    name: declarationShape.name.describe("Tool name: dot-separated words, e.g. `weather.current`"),
    method: z.enum(HTTP_TOOL_METHODS).describe("Read case-insensitively"),
    url: declarationShape.url.describe(
      "Absolute http(s) URL, without credentials (`user:secret@`; send them in a header); `{param}` placeholders in the path and query (not in the scheme or host) are filled from the input, each a property of `inputSchema`",
    ),
    headers: declarationShape.headers.describe("Header values may hold `{param}` placeholders"),
    query: declarationShape.query.describe("Input fields sent as query parameters"),
    body: z.unknown().optional().describe('`"input"` (the input as JSON) or a JSON template with `{param}` placeholders'),
    inputSchema: z.record(z.string(), z.unknown()).describe("JSON Schema of the input (an object schema)"),
    outputSchema: z.record(z.string(), z.unknown()).optional().describe("JSON Schema of the output"),
    tenants: declarationShape.tenants.describe("Always the caller's tenant; any other value is refused"),
  })
  .meta({ id: "HttpToolDeclaration", description: "An HTTP tool declared without code" });

const serverShape = mcpServerConfigSchema.shape;
const mcpServerBody = z
  .strictObject({
    ...serverShape,
    name: serverShape.name.describe("Server name, the prefix of its tools' names (`{name}.{tool}`)"),
    transport: serverShape.transport.describe("`stdio` needs role admin: it starts a command on the worker's host"),
    tenants: serverShape.tenants.describe("Always the caller's tenant; any other value is refused"),
  })
  .meta({ id: "McpServerConfig", description: "An MCP server whose tools are served" });

const sourceSchema = z
  .object({
    kind: z.enum(["http", "mcp"]),
    name: z.string(),
    declaration: z.record(z.string(), z.unknown()).optional().describe("kind http: the declaration (header values redacted)"),
    server: z.record(z.string(), z.unknown()).optional().describe("kind mcp: the server configuration (header and env values redacted)"),
    updatedAt: z.string(),
    status: z
      .enum(["pending", "ready", "failed"])
      .describe("pending: no worker has loaded this version yet; ready: its tools are served; failed: see error"),
    tools: z.array(z.string()).describe("The tools the source yields, once loaded"),
    error: z.object({ code: z.string(), message: z.string() }).optional(),
  })
  .meta({ id: "ToolSource" });

const sourceListSchema = z.object({ items: z.array(sourceSchema) });
const sourceParams = z.object({
  kind: z.enum(["http", "mcp"]).describe("http or mcp"),
  name: z.string().regex(NAME, "dot-separated words of letters, digits, _ or -").max(200).describe("Source name"),
});

function redact(values: unknown): unknown {
  if (values === null || typeof values !== "object" || Array.isArray(values)) return values;
  return Object.fromEntries(Object.keys(values).map((k) => [k, REDACTED]));
}

/**
 * The largest declaration (its JSON) a source may have: it is kept as one record on the bus,
 * whose messages are at most 1 MiB by default, and a declaration is a description, not data.
 */
const SOURCE_MAX_BYTES = 256 * 1024;

/**
 * A user name or password in a source's URL (`https://user:secret@host/…`): the outbound HTTP
 * guard refuses every call to such a URL, and the URL, unlike header values, is sent back to
 * every key of the tenant. Checked for an HTTP tool's `url` and an MCP server's `transport.url`.
 */
function urlCredentialIssues(body: unknown): Issue[] {
  const b = (typeof body === "object" && body !== null ? body : {}) as { url?: unknown; transport?: { url?: unknown } | null };
  const at: [string, unknown][] = [["body.url", b.url], ["body.transport.url", typeof b.transport === "object" && b.transport !== null ? b.transport.url : undefined]];
  const issues: Issue[] = [];
  for (const [path, raw] of at) {
    if (typeof raw !== "string") continue;
    let url: URL;
    try {
      url = new URL(raw.replace(/\{[^{}]*\}/g, "x"));
    } catch {
      continue; // the schema reports it
    }
    if (url.username !== "" || url.password !== "") {
      issues.push({ path, code: "url_credentials", message: "credentials in the URL are not allowed (every call to it would be refused, and the URL is shown to the tenant's keys): send them in a header, whose value is never sent back" });
    }
  }
  return issues;
}

/** Parses a body with one of `@baton/tools`' schemas; every problem becomes one issue. */
function parseBody<T>(schema: z.ZodType<T>, body: unknown, tenantId: string): T {
  const r = schema.safeParse(body);
  const found = [...(r.success ? [] : zodIssuesToProblems("body", r.error.issues)), ...urlCredentialIssues(body)];
  const bytes = Buffer.byteLength(JSON.stringify(body ?? null));
  if (bytes > SOURCE_MAX_BYTES) found.push({ path: "body", code: "too_big", message: `the declaration is ${bytes} bytes of JSON; at most ${SOURCE_MAX_BYTES}` });
  const tenants = (body as { tenants?: unknown } | null)?.tenants;
  if (tenants !== undefined && !(Array.isArray(tenants) && tenants.length === 1 && tenants[0] === tenantId)) {
    found.push({ path: "body.tenants", code: "custom", message: "a source's tools belong to the caller's tenant; leave tenants out" });
  }
  if (found.length > 0) throw RequestInvalid("body", found.length, { details: found });
  return (r as { data: T }).data;
}

async function stored(store: ToolSourceStore, s: StoredToolSource): Promise<z.infer<typeof sourceSchema>> {
  const st = await store.getStatus(s.kind, s.name);
  const current = st !== undefined && st.revision === s.revision;
  const base = {
    kind: s.kind,
    name: s.name,
    updatedAt: s.updatedAt,
    status: current ? st.state : ("pending" as const),
    tools: current ? st.tools : [],
    ...(current && st.error ? { error: st.error } : {}),
  };
  if (s.kind === "http") {
    const d = s.declaration;
    return { ...base, declaration: { ...d, ...(d.headers ? { headers: redact(d.headers) } : {}) } };
  }
  const t = (s.server.transport ?? {}) as Record<string, unknown>;
  const transport = { ...t, ...(t.headers ? { headers: redact(t.headers) } : {}), ...(t.env ? { env: redact(t.env) } : {}) };
  return { ...base, server: { ...s.server, transport } };
}

export const toolSourcesPlugin: FastifyPluginAsyncZod<ToolSourcesPluginOptions> = async (app, { deps }) => {
  const tags = [TAGS.toolSources];
  const sources = (): ToolSourceStore => {
    if (!deps.toolSources) throw ToolSourcesUnavailable();
    return deps.toolSources;
  };

  /** 404 unless the source exists and belongs to `tenantId`. */
  const owned = async (kind: ToolSourceKind, name: string, tenantId: string): Promise<StoredToolSource> => {
    const s = await sources().get(kind, name);
    if (!s || s.tenantId !== tenantId) throw NotFound("tool source", `${kind}/${name}`);
    return s;
  };

  /** Refuses a name held by another tenant's source of the same kind, or (for an HTTP tool) by a tool written in code. */
  const assertFree = async (kind: ToolSourceKind, name: string, tenantId: string): Promise<void> => {
    const prior = await sources().get(kind, name);
    if (prior && prior.tenantId !== tenantId) throw ToolSourceNameTaken(kind, name, "another tenant");
    if (kind === "http" && deps.tools) {
      const tool = await deps.tools.get(name);
      if (tool && tool.kind === "worker") throw ToolSourceNameTaken(kind, name, "a tool written in code");
    }
  };

  const created = { 200: sourceSchema.describe("Replaced an existing source of the same name"), 201: sourceSchema };

  app.post("/tool-sources/http", {
    schema: {
      tags,
      summary: "Declare an HTTP tool without code",
      description:
        "Stores the declaration; the built-in worker serves it as a tool of the caller's tenant within moments (see `status`). " +
        "Every invalid field is listed in `errors`. 201 when new, 200 when it replaced the caller's source of the same name.",
      security: API_SECURITY,
      body: httpDeclarationBody,
      response: { ...created, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    // The route schema documents the body; `@baton/tools`' schema checks it, all problems at once.
    validatorCompiler: () => (data: unknown) => ({ value: data }),
    handler: async (request, reply) => {
      const { tenantId } = request.auth;
      parseBody(httpToolDeclarationSchema, request.body, tenantId);
      const declaration = request.body as unknown as JsonObject & { name: string };
      await assertFree("http", declaration.name, tenantId);
      const { tenants: _t, ...rest } = declaration;
      const source = { kind: "http" as const, name: declaration.name, tenantId, declaration: rest as JsonObject, updatedAt: new Date().toISOString() };
      const { revision, replaced } = await sources().put(source);
      reply.code(replaced ? 200 : 201);
      return stored(sources(), { ...source, revision });
    },
  });

  app.post("/tool-sources/mcp", {
    schema: {
      tags,
      summary: "Serve an MCP server's tools",
      description:
        "Stores the server configuration; the built-in worker connects to it and serves its tools as `{name}.{tool}` for the caller's tenant. " +
        "The stdio transport starts a command on the worker's host, so it needs role admin. " +
        "If the server cannot be reached the source stays listed with `status: failed` and the error.",
      security: API_SECURITY,
      body: mcpServerBody,
      response: { ...created, ...apiErrors, 409: problemSchema, 503: problemSchema },
    },
    validatorCompiler: () => (data: unknown) => ({ value: data }),
    handler: async (request, reply) => {
      const { tenantId, role } = request.auth;
      const config = parseBody(mcpServerConfigSchema, request.body, tenantId);
      if (config.transport.type === "stdio" && role !== "admin") throw StdioSourceForbidden(role);
      await assertFree("mcp", config.name, tenantId);
      const { tenants: _t, ...rest } = request.body as unknown as JsonObject;
      const source = { kind: "mcp" as const, name: config.name, tenantId, server: rest, updatedAt: new Date().toISOString() };
      const { revision, replaced } = await sources().put(source);
      reply.code(replaced ? 200 : 201);
      return stored(sources(), { ...source, revision });
    },
  });

  app.get("/tool-sources", {
    schema: {
      tags,
      summary: "List this tenant's tool sources",
      description: "HTTP tool declarations and MCP servers of the caller's tenant, sorted by kind and name, with what the serving workers report.",
      security: API_SECURITY,
      response: { 200: sourceListSchema, ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const all = await sources().list();
      const mine = all.filter((s) => s.tenantId === request.auth.tenantId);
      return { items: await Promise.all(mine.map((s) => stored(sources(), s))) };
    },
  });

  app.get("/tool-sources/:kind/:name", {
    schema: {
      tags,
      summary: "Get one tool source",
      security: API_SECURITY,
      params: sourceParams,
      response: { 200: sourceSchema, ...apiErrors, 503: problemSchema },
    },
    handler: async (request) => {
      const { kind, name } = request.params;
      return stored(sources(), await owned(kind, name, request.auth.tenantId));
    },
  });

  app.delete("/tool-sources/:kind/:name", {
    schema: {
      tags,
      summary: "Remove a tool source",
      description: "The serving workers stop serving its tools (calls in flight finish) and remove them from the registry.",
      security: API_SECURITY,
      params: sourceParams,
      response: { 204: z.null().describe("Removed"), ...apiErrors, 503: problemSchema },
    },
    handler: async (request, reply) => {
      const { kind, name } = request.params;
      await owned(kind, name, request.auth.tenantId);
      await sources().delete(kind, name);
      return reply.code(204).send(null);
    },
  });
};
