/**
 * Rules: the generated Prisma client is current — `node scripts/generate.ts prisma`
 * (run by every `./baton` set-up) finds its stamp matching schema.prisma and exits at
 * once, printing nothing. If this fails, schema.prisma changed without regeneration.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "@jest/globals";

const root = fileURLToPath(new URL("../../../", import.meta.url));

it("skips generation silently when the client matches schema.prisma", () => {
  const res = spawnSync(process.execPath, ["scripts/generate.ts", "prisma"], { cwd: root, encoding: "utf8" });
  expect({ status: res.status, stdout: res.stdout, stderr: res.stderr }).toEqual({ status: 0, stdout: "", stderr: "" });
});
