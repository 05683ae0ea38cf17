/**
 * The gateway's Fastify application, built by a factory so tests can `inject()`
 * into it and the runtime can `listen()` on it (fastify's Testing guide).
 *
 * Layout: docs (OpenAPI + Swagger UI) and health at the root without auth; every
 * feature plugin under `/api`, in one scope guarded by the auth plugin. One error
 * handler renders every error as problem+json.
 */
import Fastify, { errorCodes } from "fastify";
import type { FastifyInstance, FastifyRequest, RouteOptions } from "fastify";
import { serializerCompiler } from "fastify-type-provider-zod";
import { MAX_JSON_DEPTH, tooDeepAt } from "@baton/engine";
import { createHttpServerTelemetry } from "@baton/telemetry";
import type { GatewayDeps, GatewayOptions } from "./deps.ts";
import { EncodingUnsupported, RequestInvalid } from "./errors.ts";
import { authPlugin } from "./plugins/auth.ts";
import { blobsPlugin } from "./plugins/blobs.ts";
import { docsPlugin } from "./plugins/docs.ts";
import { executionsPlugin } from "./plugins/executions.ts";
import { healthPlugin } from "./plugins/health.ts";
import { memoryPlugin } from "./plugins/memory.ts";
import { reviewsPlugin } from "./plugins/reviews.ts";
import { toolSourcesPlugin } from "./plugins/tool-sources.ts";
import { toolsPlugin } from "./plugins/tools.ts";
import { workflowsPlugin } from "./plugins/workflows.ts";
import { MAX_BODY_BYTES, MAX_PARAM_LENGTH, clientErrorHandler, errorHandler, frameworkError, notFoundHandler, routePattern, validatorCompiler } from "./problem.ts";
import { queryOf } from "./schemas.ts";
import { SseRegistry } from "./sse.ts";

/** fastify's default JSON parser, which is callback-style. */
type JsonParser = (request: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => void;

/** Issues listed per kind of bad value, at most: enough to show the pattern without a huge answer. */
const MAX_LEAF_ISSUES = 100;

/** The paths (`.a[0]["b c"]`, or "" for the value itself) of the leaves (strings, numbers, …) and keys that `bad` refuses, in document order. */
function badLeavesAt(value: unknown, bad: (leaf: unknown) => boolean): string[] {
  const seg = (k: string | number): string => (typeof k === "number" ? `[${k}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`);
  const found: string[] = [];
  const stack: { v: unknown; path: string }[] = [{ v: value, path: "" }];
  while (stack.length > 0 && found.length < MAX_LEAF_ISSUES) {
    const { v, path } = stack.pop()!;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: path + seg(i) });
    } else if (typeof v === "object" && v !== null) {
      const keys = Object.keys(v);
      for (const k of keys) if (bad(k)) found.push(path + seg(k));
      for (let i = keys.length - 1; i >= 0; i--) stack.push({ v: (v as Record<string, unknown>)[keys[i]!], path: path + seg(keys[i]!) });
    } else if (bad(v)) {
      found.push(path);
    }
  }
  return found.slice(0, MAX_LEAF_ISSUES);
}

/**
 * Values Postgres cannot store as sent, each with the JSON text that alone can make it (so the
 * text tells whether to look): a NUL character, refused in text and JSON; a UTF-16 surrogate
 * without its pair, which is no Unicode character: refused in JSON, and silently replaced by
 * U+FFFD in text; and a number past ±1.8e308, which JSON.parse makes Infinity: stored as null.
 */
const UNSTORABLE: { text: RegExp; bad: (leaf: unknown) => boolean; code: string; message: string }[] = [
  { text: /\\u0000/, bad: (v) => typeof v === "string" && v.includes("\0"), code: "invalid_string", message: "contains a NUL character (\\u0000), which cannot be stored" },
  {
    text: /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/,
    bad: (v) => typeof v === "string" && !v.isWellFormed(),
    code: "invalid_string",
    message: "contains an unpaired UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), which is no Unicode character and cannot be stored",
  },
  {
    text: /[eE][+-]?[0-9]{3}|[0-9]{309}/,
    bad: (v) => typeof v === "number" && !Number.isFinite(v),
    code: "invalid_number",
    message: "is a number too large for a double (past ±1.8e308), which cannot be stored",
  },
];

/**
 * The paths of the keys fastify's JSON parser refuses as prototype poisoning (secure-json-parse):
 * every `__proto__`, and every `constructor` whose value is an object with a `prototype`.
 * `value` comes from JSON.parse, which keeps such keys as plain own properties.
 */
function poisonedKeysAt(value: unknown): string[] {
  const seg = (k: string | number): string => (typeof k === "number" ? `[${k}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`);
  const found: string[] = [];
  const stack: { v: unknown; path: string }[] = [{ v: value, path: "" }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: path + seg(i) });
    } else if (typeof v === "object" && v !== null) {
      // Own data properties only: `v.__proto__` would read the prototype's accessor.
      const entries = Object.keys(v).map((k): [string, unknown] => [k, Object.getOwnPropertyDescriptor(v, k)?.value]);
      const poisoned = (k: string, child: unknown): boolean =>
        k === "__proto__" || (k === "constructor" && typeof child === "object" && child !== null && Object.hasOwn(child, "prototype"));
      for (const [k, child] of entries) if (poisoned(k, child)) found.push(path + seg(k));
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i]!;
        if (!poisoned(k, child)) stack.push({ v: child, path: path + seg(k) });
      }
    }
  }
  return found;
}

/**
 * A route with no body in its schema (a DELETE, a restore) reads none: whatever body comes is
 * not parsed, so it answers as without one, and as its OpenAPI entry (no body, no 415) says.
 * (A request no route matches is parsed as before it got its 404 or 405.)
 */
function takesNoBody(request: FastifyRequest): boolean {
  return request.routeOptions.url !== undefined && request.routeOptions.schema?.body === undefined;
}

/** The query of a route that declares none: no parameter at all. */
const NO_QUERY = queryOf({});

/**
 * An `onRoute` hook: a route without a query schema gets {@link NO_QUERY}, so any query
 * parameter it is sent is refused (400, `unrecognized_key`) as one a list does not have is,
 * rather than ignored. A route that brings its own validator compiler (one that checks its
 * body itself) has that default checked by the gateway's. The OpenAPI document lists no
 * parameter for it (the schema has none).
 */
export function refuseUndeclaredQuery(route: RouteOptions): void {
  if (route.schema?.querystring !== undefined) return;
  route.schema = { ...route.schema, querystring: NO_QUERY };
  const own = route.validatorCompiler;
  if (own) route.validatorCompiler = (req) => (req.httpPart === "querystring" && req.schema === NO_QUERY ? validatorCompiler({ ...req, schema: NO_QUERY }) : own(req));
}

/** Builds the gateway app (not listening). Close it with `app.close()`; open SSE streams are ended then. */
export async function buildApp(deps: GatewayDeps, opts: GatewayOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? false,
    // Bodies carry workflow definitions; 1 MiB is the default, raise it for big graphs.
    bodyLimit: MAX_BODY_BYTES,
    // Path parameters such as a tool source's name (up to 200 characters) reach the route's
    // own checks, which answer a problem naming them; fastify's default cuts at 100 with a 414.
    // (Under routerOptions: the top-level option is deprecated in fastify 5, FSTDEP022.)
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A path that does not decode, or a parameter past that length, is refused by the router
    // before any route: answered as problem+json like every other error.
    frameworkErrors: frameworkError,
    // And a request Node's HTTP parser refuses (a bad header, headers too large), before fastify.
    clientErrorHandler,
  });
  // An empty JSON body counts as no body, so `POST …/execute` with only a content type
  // works, and a route that takes no body reads none; anything else goes to fastify's parser
  // (which guards against prototype poisoning: such a body is refused naming each key, below).
  const parseJson = app.getDefaultJsonParser("error", "error") as unknown as JsonParser;
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "" || takesNoBody(request)) {
      done(null, undefined);
      return;
    }
    parseJson(request, text, (err, parsed) => {
      if (err) {
        // fastify reports a key it refuses (`__proto__`, `constructor.prototype`) as invalid
        // JSON: valid JSON with such keys is refused here naming each one instead.
        let plain: unknown;
        try {
          plain = JSON.parse(text);
        } catch (syntax) {
          // fastify's own text does not say where: JSON.parse's does (position, line, column).
          const where = syntax instanceof SyntaxError ? syntax.message.slice(0, 300) : "";
          return done(where === "" ? err : Object.assign(err, { message: `the body is not valid JSON: ${where}` }));
        }
        const poisoned = poisonedKeysAt(plain);
        if (poisoned.length === 0) return done(err);
        const details = poisoned.map((at) => ({
          path: `body${at}`,
          code: "forbidden_key",
          message: at.endsWith("__proto__") ? "a property named __proto__ is not accepted" : "a property named constructor holding a prototype is not accepted",
        }));
        return done(RequestInvalid("body", details.length, { details }));
      }
      // Refused before any schema or the engine walks it recursively (see MAX_JSON_DEPTH).
      const deep = tooDeepAt(parsed);
      if (deep !== undefined) {
        const issue = { path: `body${deep.slice(1)}`, code: "too_deep", message: `the JSON nests more than ${MAX_JSON_DEPTH} levels deep here` };
        return done(RequestInvalid("body", 1, { details: [issue] }));
      }
      // Values Postgres cannot store: refused here, naming where, rather than by the store
      // (or altered by it) after the request's own checks passed.
      const details: { path: string; code: string; message: string }[] = [];
      for (const u of UNSTORABLE) {
        if (u.text.test(text)) for (const at of badLeavesAt(parsed, u.bad)) details.push({ path: `body${at}`, code: u.code, message: u.message });
      }
      if (details.length > 0) return done(RequestInvalid("body", details.length, { details }));
      done(null, parsed);
    });
  });
  // Every body is JSON: a text/plain one (fastify parses it as a string by default) would reach
  // the route's schema as "expected object, received string", whatever it held. A body of any
  // other type is 415, unless it is empty: that counts as no body, as an empty JSON one does,
  // so `fetch(url, { method: "POST", body: "" })` (text/plain) or `curl -d ''` (a form) work.
  app.removeContentTypeParser("text/plain");
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "" || takesNoBody(request)) done(null, undefined);
    else done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE());
  });
  // A request that names a trace (W3C `traceparent`) is handled in it: the commands it sends,
  // and so the executor's events and the tool calls, carry the client's trace on.
  // It is also where the request's server span and its `http.server.request.duration` start.
  const httpTelemetry = createHttpServerTelemetry("@baton/gateway");
  app.addHook("onRequest", (request, _reply, done) => {
    httpTelemetry.onRequest(request, request.method, request.routeOptions.url, request.headers, done);
  });
  app.addHook("onResponse", (request, reply, done) => {
    httpTelemetry.onResponse(request, request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime);
    done();
  });
  // A request whose client went away gets no onResponse: its span ends here.
  app.addHook("onRequestAbort", (request, done) => {
    httpTelemetry.onAbort(request);
    done();
  });
  // fastify decompresses nothing: a gzip body would be parsed as it came and refused as "not
  // valid JSON" (quoting binary). Any encoding but identity is refused as such instead.
  app.addHook("preParsing", async (request) => {
    // A route that reads no body takes any content type, even one that is no media type at all
    // (`json`), which fastify would refuse (415) before any parser: it is dropped unread. The
    // body is still read, up to the limit (413 past it), and not parsed.
    if (takesNoBody(request)) {
      delete request.raw.headers["content-type"];
      return;
    }
    const hasBody = request.headers["transfer-encoding"] !== undefined || Number(request.headers["content-length"] ?? 0) > 0;
    if (!hasBody) return;
    const raw = request.headers["content-encoding"];
    const encoding = (Array.isArray(raw) ? raw.join(", ") : (raw ?? "")).trim();
    if (encoding !== "" && encoding.toLowerCase() !== "identity") throw EncodingUnsupported(encoding.slice(0, 100));
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(errorHandler);
  // Every route's method and pattern, so that a path with a route of other methods is 405, not 404.
  const routes: { method: string; pattern: RegExp }[] = [];
  app.addHook("onRoute", (route) => {
    const pattern = routePattern(route.url);
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) routes.push({ method: String(method), pattern });
  });
  app.setNotFoundHandler(notFoundHandler(routes));

  const sse = new SseRegistry();
  app.addHook("preClose", async () => sse.closeAll());

  await app.register(docsPlugin, { deps });
  await app.register(healthPlugin, { deps });
  await app.register(
    async (api) => {
      // Every /api route refuses query parameters it does not take. Not the docs and health
      // routes: probes and Swagger UI's assets are fetched by clients that may add a harmless one.
      api.addHook("onRoute", refuseUndeclaredQuery);
      await api.register(authPlugin, { deps, ...(opts.authCacheTtlMs === undefined ? {} : { cacheTtlMs: opts.authCacheTtlMs }) });
      await api.register(workflowsPlugin, { deps });
      await api.register(executionsPlugin, { deps, sse, ...(opts.sseHeartbeatMs === undefined ? {} : { heartbeatMs: opts.sseHeartbeatMs }) });
      await api.register(memoryPlugin, { deps });
      await api.register(reviewsPlugin, { deps });
      await api.register(toolsPlugin, { deps });
      await api.register(toolSourcesPlugin, { deps });
      await api.register(blobsPlugin, { deps });
    },
    { prefix: "/api" },
  );
  return app;
}
