/** Small helpers shared by the route plugins. */
import type { FastifyBaseLogger } from "fastify";
import { isBlobRef } from "@baton/engine";
import type { JsonValue } from "@baton/engine";
import { hasCode } from "@baton/errors";
import type { GatewayDeps } from "../deps.ts";
import { NotFound } from "../errors.ts";
import type { Issue } from "../problem.ts";
import { problemSchema } from "../problem.ts";

/** How the blob store names a blob: `blob:` and its SHA-256 in hex. */
const STORED_REF = /^blob:[0-9a-f]{64}$/;
/** Blob references checked per request (the store's limit per call). */
const MAX_REFS = 1000;

/**
 * Problems of the blob references (`{ "$ref": "blob:<sha256>", … }`) in a value a client sends
 * into a run (an execution's input, a fork's context values, a review's data): one
 * `unknown_blob` at each reference to a blob the tenant does not have, which no step could
 * read. A reference to one of the tenant's blobs (an earlier run's large value) is fine. No
 * round trip when the value holds none.
 */
export async function blobRefIssues(deps: GatewayDeps, tenantId: string, value: unknown, at: string): Promise<Issue[]> {
  const found: { path: string; ref: string }[] = [];
  const walk = (v: unknown, path: string): void => {
    if (isBlobRef(v as JsonValue)) found.push({ path, ref: (v as { $ref: string }).$ref });
    else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (typeof v === "object" && v !== null) for (const [k, x] of Object.entries(v)) walk(x, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`);
  };
  walk(value, at);
  if (found.length === 0) return [];
  if (found.length > MAX_REFS) return [{ path: at, code: "too_many_blob_refs", message: `holds ${found.length} blob references; at most ${MAX_REFS}` }];
  // A reference of another form than the store's (`blob:abc`) names no blob either.
  const stored = found.filter((f) => STORED_REF.test(f.ref));
  const missing = new Set(stored.length === 0 ? [] : await deps.store.blobs.missing(tenantId, stored.map((f) => f.ref)));
  return found
    .filter((f) => !STORED_REF.test(f.ref) || missing.has(f.ref.slice("blob:".length)))
    .map((f) => ({ path: f.path, code: "unknown_blob", message: `${f.ref} names no blob of this tenant: a blob reference must be one Baton gave out (an earlier run's large value)` }));
}

/** Runs a store read; a missing row (null, undefined or a 404 error) becomes the gateway's NotFound. */
export async function orNotFound<T>(kind: string, id: number, read: () => Promise<T | null | undefined>): Promise<T> {
  let row: T | null | undefined;
  try {
    row = await read();
  } catch (err) {
    if (hasCode(err) && err.status === 404) throw NotFound(kind, id, { cause: err });
    throw err;
  }
  if (row === null || row === undefined) throw NotFound(kind, id);
  return row;
}

/**
 * Publishes an event after the write it describes has committed. A failure is
 * logged, not answered: the write happened, and a 5xx would make the client retry it.
 */
export async function publishAfterWrite(
  deps: GatewayDeps,
  log: FastifyBaseLogger,
  type: string,
  tenantId: string,
  scopeId: number,
  data: Record<string, unknown>,
): Promise<void> {
  try {
    await deps.events.publish(type, tenantId, scopeId, data);
  } catch (err) {
    log.warn({ err, type, scopeId }, "event could not be published");
  }
}

/** Drops keys whose value is undefined (the store treats present keys as "set this"). */
export function defined<T extends Record<string, unknown>>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

/**
 * Error answers an `/api/*` route may give, for the OpenAPI document, which keeps those the route
 * can give (docs.ts, `problemResponses`). 503 and 500 on every one: the API key is checked against
 * the database (BATON_STORE_UNAVAILABLE while it is down), and anything unexpected is a 500.
 */
export const apiErrors = {
  400: problemSchema,
  401: problemSchema,
  403: problemSchema,
  404: problemSchema,
  414: problemSchema,
  500: problemSchema,
  503: problemSchema,
} as const;
