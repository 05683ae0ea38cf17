/**
 * Starting Baton as a library: `startBaton(config)` runs the configured target in
 * this process and returns a handle to stop it. `bin/baton.ts` is the command;
 * tests use this directly.
 */
import type { BatonConfig, ModuleName } from "@baton/config";
import { ALL_MODULES } from "@baton/config";
import type { ModuleManager } from "@baton/runtime";
import { createModuleManager, startHealthServer } from "@baton/runtime";
import type { HealthServer } from "@baton/runtime";
import type { Logger } from "@baton/telemetry";
import { MODULES } from "./modules.ts";
import type { Ctx, GatewayService } from "./modules.ts";
import type { ToolSpec } from "@baton/sdk";

export interface StartOptions {
  config: BatonConfig;
  logger: Logger;
  /** Extra tools for the built-in worker. */
  tools?: readonly ToolSpec[];
  onApiKey?: (key: string) => void;
  /** Serve /healthz and /readyz on config.healthPort when the gateway is not in the target. @default true */
  healthServer?: boolean;
}

export interface BatonHandle {
  manager: ModuleManager;
  /** The gateway's port, when this process runs it. */
  gatewayPort: number | undefined;
  stop(): Promise<void>;
}

/**
 * The OpenTelemetry `service.name` of a process running `target` (unless `OTEL_SERVICE_NAME`
 * says otherwise): `baton` for every module, else `baton-` and the modules, as the process's
 * bus connection is named (`baton-executor`, `baton-gateway+worker`).
 */
export function telemetryServiceName(target: readonly ModuleName[]): string {
  return ALL_MODULES.every((m) => target.includes(m)) ? "baton" : `baton-${target.join("+")}`;
}

export async function startBaton(opts: StartOptions): Promise<BatonHandle> {
  const { config, logger } = opts;
  // eslint-disable-next-line prefer-const
  let manager: ModuleManager;
  const ctx: Ctx = { config, logger, manager: () => manager, ...(opts.tools ? { tools: opts.tools } : {}), ...(opts.onApiKey ? { onApiKey: opts.onApiKey } : {}) };
  manager = createModuleManager(MODULES, config.target, ctx);
  let health: HealthServer | undefined;
  try {
    await manager.start();
    if (!config.target.includes("gateway") && (opts.healthServer ?? true) && config.healthPort > 0) {
      health = await startHealthServer(manager, config.healthPort);
    }
  } catch (err) {
    await manager.stop().catch(() => undefined);
    throw err;
  }
  logger.info("baton running", { modules: manager.order });
  return {
    manager,
    gatewayPort: config.target.includes("gateway") ? manager.get<GatewayService>("gateway").port : undefined,
    async stop() {
      await health?.close();
      await manager.stop();
    },
  };
}
