/**
 * How a forEach's cost grows with its list: one forEach of `echo` calls over lists of
 * several lengths, and the same lists split into chunks run as child executions (the
 * workaround docs/workflows.md gives), side by side in one Baton, alternating. Reports
 * each run's time and its time per item; a step whose cost does not grow with the list
 * keeps the time per item flat.
 *
 *   ./baton node bench/engine/long-list.ts [--sizes 500,2000,8000] [--concurrency 16] [--chunk 100] [--item-bytes 200] [--repeat 1]
 */
import { parseArgs } from "node:util";
import { positiveOption as positive } from "./args.ts";
import { createBatonBench } from "./baton.ts";

const args = parseArgs({
  options: {
    sizes: { type: "string", default: "500,2000,8000" },
    concurrency: { type: "string", default: "16" },
    chunk: { type: "string", default: "100" },
    "item-bytes": { type: "string", default: "200" },
    repeat: { type: "string", default: "1" },
    flat: { type: "boolean", default: true },
    chunked: { type: "boolean", default: true },
  },
  allowNegative: true,
}).values;
const sizes = args.sizes.split(",").map((s) => positive("sizes", s));
const concurrency = positive("concurrency", args.concurrency);
const chunk = positive("chunk", args.chunk);
const itemBytes = positive("item-bytes", args["item-bytes"]);
const repeat = positive("repeat", args.repeat);

const flat = {
  nodes: [{ id: "each", type: "forEach", config: { items: "$.input.xs", tool: "echo", concurrency } }],
  edges: [],
};
const chunked = {
  nodes: [
    {
      id: "chunks",
      type: "transform",
      config: { expression: `[$map([0..$floor(($count($.input.xs) - 1) / ${chunk})], function($c) { [$.input.xs[[$c * ${chunk}..($c + 1) * ${chunk} - 1]]] })]` },
    },
    {
      id: "each",
      type: "forEach",
      config: {
        items: "$.chunks",
        concurrency: Math.max(1, Math.floor(concurrency / 4)),
        body: { nodes: [{ id: "inner", type: "forEach", config: { items: "$.input.item", tool: "echo", concurrency } }], edges: [], output: { results: "$.inner" } },
      },
    },
  ],
  edges: [{ from: "chunks", to: "each" }],
};

const baton = await createBatonBench({
  natsUrl: process.env.BATON_NATS_URL ?? "nats://127.0.0.1:4222",
  redisUrl: process.env.BATON_REDIS_URL ?? "redis://127.0.0.1:6379",
  databaseUrl: process.env.BATON_BENCH_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/test",
});
try {
  const variants = [
    ...(args.flat ? [["one forEach", await baton.workflow("long-list-flat", flat)] as const] : []),
    ...(args.chunked ? [[`chunks of ${chunk}`, await baton.workflow("long-list-chunked", chunked)] as const] : []),
  ];
  const pad = "x".repeat(Math.max(0, itemBytes - 40));
  console.log(`forEach of echo calls, concurrency ${concurrency}, items of about ${itemBytes} bytes`);
  console.log("| items | variant | run | per item |");
  console.log("|--:|---|--:|--:|");
  for (const n of sizes) {
    const xs = Array.from({ length: n }, (_, i) => ({ i, pad }));
    for (let r = 0; r < repeat; r++) {
      for (const [label, run] of r % 2 === 0 ? variants : [...variants].reverse()) {
        const { ms, status, detail } = await run({ xs });
        if (status !== "execution.completed") throw new Error(`${label} over ${n} items ended with ${status} ${detail}`);
        console.log(`| ${n} | ${label} | ${(ms / 1000).toFixed(2)} s | ${(ms / n).toFixed(2)} ms |`);
      }
    }
  }
} finally {
  await baton.close();
}
