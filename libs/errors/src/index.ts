/**
 * Baton's error model. Every library keeps one catalogue of errors built with
 * {@link defineError}; codes are stable and never reused. Callers check errors by
 * `code` (see {@link hasCode}), never with `instanceof`.
 *
 * Retryability is data on the error: the bus maps it to JetStream ack / nak / term
 * in one place, and the gateway maps `status` to the HTTP answer.
 */

export interface BatonErrorOptions {
  cause?: unknown;
  /** Structured detail for clients, e.g. the list of validation problems. */
  details?: unknown;
  /** Override the catalogue's retryability for this instance. */
  retryable?: boolean;
  /** Suggested delay before a retry, in milliseconds. */
  retryDelayMs?: number;
}

export class BatonError extends Error {
  readonly code: string;
  /** HTTP status the gateway answers with. */
  readonly status: number;
  readonly retryable: boolean;
  readonly retryDelayMs: number | undefined;
  readonly details: unknown;

  constructor(code: string, message: string, status: number, retryable: boolean, options: BatonErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "BatonError";
    this.code = code;
    this.status = status;
    this.retryable = options.retryable ?? retryable;
    this.retryDelayMs = options.retryDelayMs;
    this.details = options.details;
  }

  toJSON(): Record<string, unknown> {
    return { code: this.code, message: this.message, ...(this.details === undefined ? {} : { details: this.details }) };
  }
}

export interface ErrorDefinition<A extends unknown[]> {
  readonly code: string;
  readonly status: number;
  (...args: [...A, BatonErrorOptions?]): BatonError;
  /** True when `err` carries this definition's code. */
  is(err: unknown): err is BatonError;
}

export interface DefineErrorOptions {
  /** @default 500 */
  status?: number;
  /** @default false */
  retryable?: boolean;
}

/**
 * Defines one catalogue entry.
 * @example
 * export const WorkflowNotFound = defineError("BATON_WORKFLOW_NOT_FOUND", (id: string) => `workflow ${id} not found`, { status: 404 });
 * throw WorkflowNotFound("42");
 */
export function defineError<A extends unknown[]>(
  code: string,
  message: (...args: A) => string,
  options: DefineErrorOptions = {},
): ErrorDefinition<A> {
  const status = options.status ?? 500;
  const retryable = options.retryable ?? false;
  const arity = message.length;
  const make = (...args: [...A, BatonErrorOptions?]): BatonError => {
    const opts = (args.length > arity ? args[arity] : undefined) as BatonErrorOptions | undefined;
    const msgArgs = args.slice(0, arity) as unknown as A;
    return new BatonError(code, message(...msgArgs), status, retryable, opts);
  };
  return Object.assign(make, {
    code,
    status,
    is: (err: unknown): err is BatonError => hasCode(err, code),
  });
}

/** True when `err` is a Baton error, optionally with the given code. */
export function hasCode(err: unknown, code?: string): err is BatonError {
  if (typeof err !== "object" || err === null) return false;
  const c = (err as { code?: unknown }).code;
  return typeof c === "string" && (code === undefined || c === code) && typeof (err as { status?: unknown }).status === "number";
}

/** Whether an error should be retried: Baton errors say so themselves; unknown errors are retried. */
export function isRetryable(err: unknown): boolean {
  if (hasCode(err)) return err.retryable;
  return true;
}

/** A short, safe message for logs and events (never a stack). */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}
