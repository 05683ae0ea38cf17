/** @baton/runtime — modules with a lifecycle, targets, health. */
export { createModuleManager, resolveOrder, ModuleCycle, ModuleStartFailed, ModuleUnknown } from "./modules.ts";
export type { ModuleDefinition, ModuleManager, ModuleState, Service } from "./modules.ts";
export { startHealthServer } from "./health.ts";
export type { HealthServer } from "./health.ts";
