/**
 * The OpenAPI 3.1 document, generated from the routes' zod schemas, served at
 * `/openapi.json`, and Swagger UI at `/docs`. Neither needs an API key.
 *
 * Registered without encapsulation and before the route plugins, so
 * @fastify/swagger sees every route of the app.
 */
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import { jsonSchemaTransform, jsonSchemaTransformObject } from "fastify-type-provider-zod";
import type { GatewayDeps } from "../deps.ts";
import { TAGS } from "../schemas.ts";
import { READ_METHODS } from "./auth.ts";

export interface DocsPluginOptions {
  deps: GatewayDeps;
  /** @default "0.1.0" */
  version?: string;
}

type JsonSchemaObject = Record<string, unknown>;

/**
 * Puts a self-contained JSON Schema into `components.schemas` under `name`: its
 * `$defs` become sibling components (`<name>_<def>`) and its `#/$defs/…` references
 * are rewritten, because inside an OpenAPI document `#` is the document's root.
 */
export function embedJsonSchema(components: Record<string, unknown>, name: string, schema: JsonSchemaObject): void {
  const { $defs, definitions, $schema: _s, $id: _i, ...rest } = schema as JsonSchemaObject & {
    $defs?: Record<string, unknown>;
    definitions?: Record<string, unknown>;
  };
  const defs = { ...(definitions ?? {}), ...($defs ?? {}) };
  const rewrite = (v: unknown): unknown =>
    JSON.parse(
      JSON.stringify(v).replace(/"#\/(?:\$defs|definitions)\/([^"]+)"/g, (_m, def: string) => JSON.stringify(`#/components/schemas/${name}_${def}`)),
    );
  for (const [def, value] of Object.entries(defs)) components[`${name}_${def}`] = rewrite(value);
  components[name] = rewrite(rest);
}

/** What the shared error answers mean, for those the zod transform left as "Default Response". */
const ERROR_DESCRIPTIONS: Readonly<Record<string, string>> = {
  400: "The request is invalid (a parameter, a query parameter the route does not take, or the body); `errors` lists every problem",
  401: "No API key, or one that is not valid",
  403: "The key's role may not do this",
  404: "What the path names does not exist for this tenant",
  409: "The request conflicts with the current state; `code` says how",
  413: "The body is larger than 4 MiB",
  414: "A path parameter is longer than 1024 characters",
  415: "The body's content type is not application/json (an empty body of any type counts as none), or the body is compressed (content-encoding)",
  500: "An unexpected failure; the detail reveals nothing",
  503: "A service the gateway depends on is unavailable (the database, the message bus, …) or not configured on it; retry later",
};

/**
 * Error answers as they are sent, fixed up in the document the zod transform made:
 * - as `application/problem+json` (the transform documents every response as `application/json`),
 *   when they are problems: /readyz's 503 is its readiness body, as JSON;
 * - the shared error set of the `/api` routes (`apiErrors`) cut to what each route can answer:
 *   400 on every one (each refuses a query parameter it does not take, app.ts), 403 only for a
 *   method the read-only role may not use (auth.ts), 404 and 414 only with a path parameter;
 * - 413 on every route whose method carries a body (all but GET and HEAD), which fastify reads,
 *   up to the limit, even where the route takes none; 415 on every route that takes a body;
 * - a body the route's schema lets be absent (it accepts `null`: the validator sees no body as
 *   `undefined`) as not required; @fastify/swagger marks every body required.
 */
export function problemResponses(doc: { paths?: unknown }): void {
  type Response = { description?: string; content?: Record<string, { schema?: { $ref?: string } }> };
  type Body = { required?: boolean; content?: Record<string, { schema?: { anyOf?: unknown[] } }> };
  type Operation = { parameters?: { in?: string }[]; requestBody?: Body; responses?: Record<string, Response> };
  const PROBLEM_REF = "#/components/schemas/Problem";
  const problem = (status: string): Response => ({ description: ERROR_DESCRIPTIONS[status] ?? "Error", content: { "application/problem+json": { schema: { $ref: PROBLEM_REF } } } });
  for (const item of Object.values((doc.paths ?? {}) as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) {
      const responses = op.responses;
      if (!responses) continue;
      const params = op.parameters ?? [];
      const body = op.requestBody;
      if (READ_METHODS.has(method.toUpperCase())) delete responses["403"];
      if (!params.some((p) => p.in === "path")) {
        delete responses["404"];
        delete responses["414"];
      }
      if (!READ_METHODS.has(method.toUpperCase())) responses["413"] ??= problem("413");
      if (body !== undefined) {
        responses["415"] ??= problem("415");
        const schemas = Object.values(body.content ?? {}).map((c) => c.schema);
        if (schemas.length > 0 && schemas.every((sc) => sc?.anyOf?.some((b) => (b as { type?: unknown }).type === "null") === true)) body.required = false;
      }
      for (const [status, r] of Object.entries(responses)) {
        const first = Object.values(r.content ?? {})[0];
        if (Number(status) < 400 || first?.schema?.$ref !== PROBLEM_REF) continue;
        r.content = { "application/problem+json": first };
        if (r.description === undefined || r.description === "Default Response") r.description = ERROR_DESCRIPTIONS[status] ?? "Error";
      }
    }
  }
}

/**
 * Drops component schemas nothing refers to: the zod transform emits every
 * registered schema in both its input and output form, most of them unused.
 */
export function pruneUnusedSchemas(doc: { paths?: unknown; components?: { schemas?: Record<string, unknown> } }): void {
  const schemas = doc.components?.schemas;
  if (!schemas) return;
  const refsOf = (v: unknown): string[] =>
    [...JSON.stringify(v ?? null).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => decodeURIComponent(m[1] ?? ""));
  const used = new Set<string>();
  const queue = refsOf(doc.paths);
  while (queue.length > 0) {
    const name = queue.pop()!;
    if (used.has(name)) continue;
    used.add(name);
    queue.push(...refsOf(schemas[name]));
  }
  for (const name of Object.keys(schemas)) if (!used.has(name)) delete schemas[name];
}

async function docsPluginImpl(app: FastifyInstance, opts: DocsPluginOptions): Promise<void> {
  const definitionSchema = opts.deps.workflowDefinitionJsonSchema;
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Baton API",
        description:
          "Baton runs AI-agent workflows durably. Every `/api` route needs an API key: `Authorization: Bearer <key>` or `x-api-key: <key>`. " +
          "Errors are `application/problem+json`. A body property or a query parameter a route does not have is refused (400, `unrecognized_key`); " +
          "a method a path does not take is 405, its `Allow` header listing those it does.",
        version: opts.version ?? "0.1.0",
      },
      tags: [
        { name: TAGS.workflows, description: "Agent workflow definitions and their versions" },
        { name: TAGS.executions, description: "Runs, node history, human-in-the-loop, live events" },
        { name: TAGS.memory, description: "Long-term agent memory" },
        { name: TAGS.reviews, description: "Human reviews" },
        { name: TAGS.tools, description: "Tools served by workers, with their schemas and live worker counts" },
        { name: TAGS.toolSources, description: "HTTP tools declared without code and MCP servers, served as tools by the built-in worker" },
        { name: TAGS.blobs, description: "Values stored once and referenced as blob:<sha256> (large tool results, outputs and event payloads)" },
        { name: TAGS.health, description: "Liveness and readiness" },
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: "http", scheme: "bearer", description: "API key as a bearer token" },
          apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key", description: "API key in a header" },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: (input) => {
      const doc = jsonSchemaTransformObject(input) as { paths?: unknown; components?: { schemas?: Record<string, unknown> } };
      if (definitionSchema && doc.components?.schemas) {
        const schemas = doc.components.schemas;
        embedJsonSchema(schemas, "WorkflowDefinition", definitionSchema);
        schemas.WorkflowDefinitionInput = { $ref: "#/components/schemas/WorkflowDefinition" };
      }
      problemResponses(doc);
      pruneUnusedSchemas(doc);
      return doc as ReturnType<typeof jsonSchemaTransformObject>;
    },
  });
  await app.register(fastifySwaggerUi, { routePrefix: "/docs" });

  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}

export const docsPlugin: FastifyPluginAsync<DocsPluginOptions> = Object.assign(docsPluginImpl, {
  [Symbol.for("skip-override")]: true,
});
