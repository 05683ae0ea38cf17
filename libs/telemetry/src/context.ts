/**
 * Process-wide OpenTelemetry plumbing that `@opentelemetry/api` alone does not provide:
 * a context manager (without one, `context.with` does nothing and no span is ever
 * "active") and a W3C propagator. Both are registered only when nothing else (an
 * OpenTelemetry SDK, say) registered its own first.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { context, propagation, ROOT_CONTEXT } from "@opentelemetry/api";
import type { Context, ContextManager } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "./traceparent.ts";

/** A context manager on `AsyncLocalStorage`, like `@opentelemetry/context-async-hooks`. */
export class AsyncLocalStorageContextManager implements ContextManager {
  #storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const cb = thisArg === undefined ? fn : (fn.bind(thisArg) as F);
    return this.#storage.run(ctx, cb, ...args);
  }

  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== "function") return target;
    const fn = target as (...args: unknown[]) => unknown;
    const run = <R>(cb: () => R): R => this.with(ctx, cb);
    return function (this: unknown, ...args: unknown[]) {
      return run(() => fn.apply(this, args));
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/** What {@link ensureContextPropagation} found or installed. */
export interface PropagationSetup {
  /** True when Baton's context manager is the global one (false: another was registered first). */
  contextManager: boolean;
  /** True when Baton's W3C propagator is the global one (false: another was registered first). */
  propagator: boolean;
}

let setup: PropagationSetup | undefined;

/**
 * Makes trace context flow through async code and across processes: registers an
 * `AsyncLocalStorage` context manager and the W3C `traceparent` propagator as the
 * OpenTelemetry globals, unless others were registered before. Idempotent; the bus and
 * {@link withSpan} call it, so applications only need it to install their own first.
 */
export function ensureContextPropagation(): PropagationSetup {
  if (setup !== undefined) return setup;
  const manager = new AsyncLocalStorageContextManager();
  const contextManager = context.setGlobalContextManager(manager);
  if (!contextManager) manager.disable();
  const propagator = propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  setup = { contextManager, propagator };
  return setup;
}
