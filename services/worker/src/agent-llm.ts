/**
 * `llm.chat` as the engine's agent nodes call it: tools are given by name (the
 * registered tools' descriptions and schemas are looked up here), SynthDev's
 * parsing-only tools come inline as `toolDefinitions`, and `responseFormat` is a
 * bare JSON Schema. Each call is turned into `@baton/llm`'s request and handed to its
 * tool (budget, streaming, retries).
 */
import { z } from "zod";
import { defineTool } from "@baton/sdk";
import type { JsonObject, ToolSpec } from "@baton/sdk";
import { chatResultSchema } from "@baton/llm";
import type { LlmRegistry, TokenBudget } from "@baton/llm";
import { ToolInvalidInput } from "@baton/sdk";
import type { Logger } from "@baton/telemetry";
import { llmTools } from "./llm.ts";

export interface AgentLlmOptions {
  registry: LlmRegistry;
  /** Looks up a registered tool's description and input schema. */
  describeTool: (name: string) => Promise<{ description: string; inputSchema: JsonObject } | null>;
  budget?: TokenBudget;
  logger?: Logger;
}

const definition = z.object({ name: z.string().min(1), description: z.string().default(""), inputSchema: z.record(z.string(), z.json()) });

export function agentLlmTools(opts: AgentLlmOptions): ToolSpec[] {
  const inner = llmTools({ registry: opts.registry, ...(opts.budget ? { budget: opts.budget } : {}), ...(opts.logger ? { logger: opts.logger } : {}) })[0]!;
  const input = z.object({
    model: z.string().min(1).optional(),
    system: z.string().optional(),
    messages: z.array(z.record(z.string(), z.json())),
    /** Registered tool names, or full definitions. */
    tools: z.array(z.union([z.string().min(1), definition])).optional(),
    /** Inline definitions (SynthDev parsing-only tools: their arguments are the answer; nothing runs). */
    toolDefinitions: z.array(definition).optional(),
    responseFormat: z.record(z.string(), z.json()).optional(),
    temperature: z.number().optional(),
    maxTokens: z.number().int().optional(),
    timeoutMs: z.number().int().positive().optional(),
    stream: z.boolean().optional(),
  });
  const chat = defineTool({
    name: "llm.chat",
    description: inner.description,
    input,
    output: chatResultSchema,
    ...(inner.timeoutMs !== undefined ? { timeoutMs: inner.timeoutMs } : {}),
    ...(inner.retry ? { retry: inner.retry } : {}),
    handler: async (req, ctx) => {
      const tools: { name: string; description: string; inputSchema: JsonObject }[] = [];
      const unknown: string[] = [];
      for (const t of req.tools ?? []) {
        if (typeof t !== "string") {
          tools.push(t);
          continue;
        }
        const d = await opts.describeTool(t);
        if (d) tools.push({ name: t, ...d });
        else unknown.push(t);
      }
      if (unknown.length) throw ToolInvalidInput("llm.chat", `tools: not registered: ${unknown.join(", ")}`);
      for (const t of req.toolDefinitions ?? []) tools.push(t);
      const request = {
        ...(req.model ? { model: req.model } : {}),
        ...(req.system !== undefined ? { system: req.system } : {}),
        messages: req.messages,
        ...(tools.length ? { tools } : {}),
        ...(req.responseFormat ? { responseFormat: { type: "json", schema: req.responseFormat } } : {}),
        ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
        ...(req.maxTokens !== undefined ? { maxTokens: req.maxTokens } : {}),
        ...(req.timeoutMs !== undefined ? { timeoutMs: req.timeoutMs } : {}),
        ...(req.stream !== undefined ? { stream: req.stream } : {}),
      };
      const parsed = inner.input!.safeParse(request);
      if (!parsed.success) throw ToolInvalidInput("llm.chat", parsed.error.issues.map((i) => `${i.path.join(".") || "(request)"}: ${i.message}`).join("; "));
      return (await inner.handler(parsed.data, ctx)) as z.input<typeof chatResultSchema>;
    },
  });
  const embedTool = defineTool({
    name: "llm.embed",
    description: "Embeds text (agent.embed): one vector per value.",
    input: z.object({ model: z.string().min(1).optional(), values: z.union([z.string(), z.array(z.string()).min(1).max(2048)]) }),
    handler: async (req, ctx) => {
      const model = req.model ?? opts.registry.config.defaultEmbeddingModel;
      if (!model) throw ToolInvalidInput("llm.embed", "model: no model given and BATON_LLM_EMBEDDING_MODEL is not set");
      const values = Array.isArray(req.values) ? req.values : [req.values];
      const out = await opts.registry.embed(model, values, { signal: ctx.signal });
      return { embeddings: out.embeddings, usage: { inputTokens: out.usage.tokens, outputTokens: 0, totalTokens: out.usage.tokens } };
    },
  });
  const imageTool = defineTool({
    name: "llm.image",
    description: "Generates an image (agent.imageGen); large results are stored by reference.",
    input: z.object({ model: z.string().min(1).optional(), prompt: z.string().min(1), size: z.string().regex(/^\d+x\d+$/).optional(), n: z.number().int().min(1).max(4).default(1) }),
    timeoutMs: 300_000,
    handler: async (req, ctx) => {
      const model = req.model ?? opts.registry.config.defaultImageModel;
      if (!model) throw ToolInvalidInput("llm.image", "model: no model given and BATON_LLM_IMAGE_MODEL is not set");
      const out = await opts.registry.image(model, req.prompt, { ...(req.size ? { size: req.size } : {}), n: req.n, signal: ctx.signal });
      return { images: out.images.map((i) => ({ mediaType: i.mediaType, base64: i.base64 })) };
    },
  });
  return [chat, embedTool, imageTool];
}
