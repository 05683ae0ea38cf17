/** Small helpers shared by the route plugins. */
import type { FastifyBaseLogger } from "fastify";
import { hasCode } from "@baton/errors";
import type { GatewayDeps } from "../deps.ts";
import { NotFound } from "../errors.ts";
import { problemSchema } from "../problem.ts";

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

/** Error answers an `/api/*` route may give, for the OpenAPI document, which keeps those the route can give (docs.ts, `problemResponses`). */
export const apiErrors = {
  400: problemSchema,
  401: problemSchema,
  403: problemSchema,
  404: problemSchema,
} as const;
