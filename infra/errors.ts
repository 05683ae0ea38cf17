/**
 * Error catalogue of Baton's local infrastructure helpers (infra/). Codes are stable
 * and never reused.
 */
import { defineError } from "@baton/errors";

/**
 * A server Baton needs is unreachable and cannot be started here (not local, or its
 * binary is not installed). The message lists every such server and how to start them.
 */
export const InfraUnavailable = defineError(
  "BATON_INFRA_UNAVAILABLE",
  (missing: string[]) =>
    `Baton cannot reach ${missing.length === 1 ? "a server it needs" : "servers it needs"}:\n` +
    missing.map((m) => `  - ${m}`).join("\n") +
    "\nstart them with: docker compose up -d nats redis postgres" +
    "\n(or run the whole stack in containers with: docker compose up)",
  { status: 503, retryable: true },
);

/** A local server was started but did not come up; the message carries the tail of its log. */
export const InfraStartFailed = defineError(
  "BATON_INFRA_START_FAILED",
  (service: string, reason: string) => `could not start local ${service}: ${reason}`,
  { status: 500 },
);

/** The database named in the URL does not exist and could not be created. */
export const InfraDatabaseFailed = defineError(
  "BATON_INFRA_DATABASE_FAILED",
  (database: string, reason: string) => `could not create database "${database}": ${reason}`,
  { status: 500 },
);

/** A server URL does not parse (the URL itself is not repeated: it may hold a password). */
export const InfraInvalidUrl = defineError(
  "BATON_INFRA_INVALID_URL",
  (server: string) => `the ${server} URL is not a valid URL`,
  { status: 500 },
);
