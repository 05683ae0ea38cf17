/** Runs the README quickstart through the HTTP API; shared by the all-in-one and multi-process tests. */
import { readFileSync } from "node:fs";
import type { Api } from "./helpers.ts";
import { waitFor } from "./helpers.ts";

export const workflowFile = JSON.parse(readFileSync(new URL("../examples/quickstart/workflow.json", import.meta.url), "utf8")) as Record<string, unknown>;
export const inputFile = JSON.parse(readFileSync(new URL("../examples/quickstart/input.json", import.meta.url), "utf8")) as Record<string, unknown>;

export interface Execution {
  id: number;
  status: string;
  currentState: string | null;
  output: Record<string, unknown> | null;
  error: string | null;
  nodes: { nodeId: string; status: string; attempt: number; output: unknown }[];
}

export async function createWorkflow(a: Api, slug?: string): Promise<number> {
  const res = await a.call<{ id: number }>("POST", "/api/agent-workflows", { ...workflowFile, ...(slug ? { slug } : {}) });
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id;
}

export async function execute(a: Api, workflowId: number, input = inputFile): Promise<number> {
  const res = await a.call<{ id: number; status: string }>("POST", `/api/agent-workflows/${workflowId}/execute`, input);
  if (res.status !== 202) throw new Error(`execute answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id;
}

export function waitForStatus(a: Api, id: number, statuses: string[], timeoutMs = 20_000): Promise<Execution> {
  return waitFor(`execution ${id} to be ${statuses.join("|")}`, async () => {
    const r = await a.call<Execution>("GET", `/api/agent-workflow-executions/${id}`);
    return statuses.includes(r.body.status) ? r.body : undefined;
  }, timeoutMs);
}
