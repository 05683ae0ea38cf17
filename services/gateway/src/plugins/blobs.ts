/**
 * `/api/blobs/:hash`: the value behind a blob reference. Large values (tool results, node
 * outputs, event payloads above `BATON_LARGE_RESULT_BYTES`) appear in executions, node rows,
 * checkpoints and events as `{ "$ref": "blob:<sha256>", "size": n }` (docs/tools.md, "Large
 * results"); a client reads the value here. Blobs are the caller's tenant's only.
 */
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { GatewayDeps } from "../deps.ts";
import { NotFound } from "../errors.ts";
import { API_SECURITY, TAGS, blobParams, blobSchema } from "../schemas.ts";
import { apiErrors } from "./common.ts";

export interface BlobsPluginOptions {
  deps: GatewayDeps;
}

export const blobsPlugin: FastifyPluginAsyncZod<BlobsPluginOptions> = async (app, { deps }) => {
  const { store } = deps;

  app.get("/blobs/:hash", {
    schema: {
      tags: [TAGS.blobs],
      summary: "Read the value behind a blob reference",
      description:
        "`hash` is the reference's `blob:<sha256>`, or the sha256 alone. A blob no execution uses any more is deleted " +
        "after `BATON_BLOB_GRACE_SECONDS` (docs/adr/008-blob-retention.md); then this answers 404.",
      security: API_SECURITY,
      params: blobParams,
      response: { 200: blobSchema, ...apiErrors },
    },
    handler: async (request) => {
      const hash = request.params.hash.replace(/^blob:/, "");
      const blob = await store.blobs.get(request.auth.tenantId, hash);
      if (!blob) throw NotFound("blob", `blob:${hash}`);
      return { ref: `blob:${blob.hash}`, size: blob.size, createdAt: blob.createdAt.toISOString(), value: blob.data };
    },
  });
};
