/**
 * Rules checked: every request body in docs/importers.md imports without errors or warnings,
 * and the definition the plan example shows is exactly what the importer produces — so the
 * document keeps telling the truth.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import type { ImportFormat } from "./index.ts";
import { importWorkflow } from "./index.ts";

const doc = readFileSync(new URL("../../../../docs/importers.md", import.meta.url), "utf8");
const bodies = [...doc.matchAll(/<<'EOF'[^\n]*\n([\s\S]*?)\nEOF\n/g)].map((m) => JSON.parse(m[1]!) as { format: ImportFormat; source: unknown; name: string });
const shown = /It becomes:\n\n```json\n([\s\S]*?)\n```/.exec(doc);

describe("docs/importers.md", () => {
  it("has one example per format", () => {
    expect(bodies.map((b) => b.format)).toEqual(["plan", "toolSequence", "stateMachine"]);
  });

  it.each(bodies.map((b) => [b.format, b] as const))("imports the %s example cleanly", (_format, body) => {
    const r = importWorkflow(body.format, body.source);
    expect(r).toMatchObject({ ok: true, warnings: [] });
  });

  it("shows the plan example's definition as imported", () => {
    const r = importWorkflow(bodies[0]!.format, bodies[0]!.source);
    expect(r.ok && r.definition).toEqual(JSON.parse(shown![1]!));
  });
});
