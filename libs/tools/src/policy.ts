/**
 * Where outbound HTTP may go. Every request of `http.request`, of HTTP tools declared
 * without code and of MCP servers reached over HTTP passes this policy: first the host
 * name against the allow-lists, then every address the name resolves to.
 */
import ipaddr from "ipaddr.js";
import { HttpHostRefused, HttpPolicyInvalid } from "./errors.ts";

/** One resolved address. `family` is 4 or 6. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** The outbound HTTP policy. Every field is optional. */
export interface HttpPolicy {
  /**
   * Hosts that may be called: exact names (`api.example.com`) or wildcards (`*.example.com`, which matches
   * `a.example.com` and `a.b.example.com` but not `example.com`). Empty or absent: any host whose addresses
   * are all public.
   * @default []
   */
  allowHosts?: string[];
  /**
   * Allow private, loopback, link-local, CGNAT, multicast, unique-local and other non-public addresses for
   * every host. Cloud metadata addresses (169.254.169.254, fd00:ec2::254) stay refused unless their host is
   * listed in `allowPrivateHosts`.
   * @default false
   */
  allowPrivate?: boolean;
  /**
   * Hosts (same patterns as `allowHosts`) that may resolve to non-public addresses, metadata included.
   * A host listed here is allowed even when `allowHosts` does not list it.
   * @default []
   */
  allowPrivateHosts?: string[];
  /** Largest response body, after decompression. @default 10485760 (10 MiB) */
  maxResponseBytes?: number;
  /** Redirects followed per request; each target is checked again. @default 5 */
  maxRedirects?: number;
  /** Time to establish the connection (TCP and TLS). @default 10000 */
  connectTimeoutMs?: number;
  /** Whole-request time limit when the caller gives none. @default 30000 */
  defaultTimeoutMs?: number;
  /** Upper bound of any caller-given time limit. @default 120000 */
  maxTimeoutMs?: number;
  /**
   * Resolves a host name to all of its addresses. Replace it to use your own resolver.
   * @default node:dns `lookup(host, { all: true })`
   */
  resolve?: (hostname: string) => Promise<ResolvedAddress[]>;
}

/** The policy with defaults applied. */
export interface CompiledHttpPolicy {
  allowHosts: readonly string[];
  allowPrivate: boolean;
  allowPrivateHosts: readonly string[];
  maxResponseBytes: number;
  maxRedirects: number;
  connectTimeoutMs: number;
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  resolve?: (hostname: string) => Promise<ResolvedAddress[]>;
}

const METADATA = new Set(["169.254.169.254", "fd00:ec2::254", "100.100.100.200"]);
const NAME_PATTERN = /^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

function positiveInt(value: unknown, name: string, problems: string[]): void {
  if (value !== undefined && (typeof value !== "number" || !Number.isInteger(value) || value < 0)) {
    problems.push(`${name} must be a non-negative integer`);
  }
}

/** Normalizes a host name or IP literal: lower case, no trailing dot, no IPv6 brackets. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** Applies defaults and validates; throws `BATON_TOOL_HTTP_POLICY_INVALID` listing every problem. */
export function compileHttpPolicy(policy: HttpPolicy | CompiledHttpPolicy = {}): CompiledHttpPolicy {
  const problems: string[] = [];
  const patterns = (list: readonly string[] | undefined, name: string): string[] => {
    if (list === undefined) return [];
    if (!Array.isArray(list)) {
      problems.push(`${name} must be an array of host names`);
      return [];
    }
    return list.map((raw, i) => {
      const h = typeof raw === "string" ? normalizeHost(raw) : "";
      if (!NAME_PATTERN.test(h) && !ipaddr.isValid(h)) problems.push(`${name}[${i}] "${String(raw)}" is not a host name, IP address or *.wildcard`);
      return h;
    });
  };
  const allowHosts = patterns(policy.allowHosts, "allowHosts");
  const allowPrivateHosts = patterns(policy.allowPrivateHosts, "allowPrivateHosts");
  if (policy.allowPrivate !== undefined && typeof policy.allowPrivate !== "boolean") problems.push("allowPrivate must be a boolean");
  for (const k of ["maxResponseBytes", "maxRedirects", "connectTimeoutMs", "defaultTimeoutMs", "maxTimeoutMs"] as const) {
    positiveInt(policy[k], k, problems);
  }
  if (problems.length > 0) throw HttpPolicyInvalid(problems, { details: problems });
  return Object.freeze({
    allowHosts: Object.freeze(allowHosts),
    allowPrivate: policy.allowPrivate ?? false,
    allowPrivateHosts: Object.freeze(allowPrivateHosts),
    maxResponseBytes: policy.maxResponseBytes ?? 10 * 1024 * 1024,
    maxRedirects: policy.maxRedirects ?? 5,
    connectTimeoutMs: policy.connectTimeoutMs ?? 10_000,
    defaultTimeoutMs: policy.defaultTimeoutMs ?? 30_000,
    maxTimeoutMs: policy.maxTimeoutMs ?? 120_000,
    ...(policy.resolve ? { resolve: policy.resolve } : {}),
  });
}

/**
 * Reads the policy from the environment:
 * - `BATON_HTTP_ALLOW_HOSTS`: comma-separated hosts / `*.wildcards` (empty: any public host);
 * - `BATON_HTTP_ALLOW_PRIVATE`: `true` or `false` (default `false`);
 * - `BATON_HTTP_ALLOW_PRIVATE_HOSTS`: comma-separated hosts that may resolve to private addresses.
 * Throws `BATON_TOOL_HTTP_POLICY_INVALID` on a bad value.
 */
export function policyFromEnv(env: Record<string, string | undefined>): HttpPolicy {
  const list = (v: string | undefined): string[] => (v ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0);
  const rawPrivate = (env.BATON_HTTP_ALLOW_PRIVATE ?? "").trim().toLowerCase();
  if (rawPrivate !== "" && rawPrivate !== "true" && rawPrivate !== "false") {
    const problem = `BATON_HTTP_ALLOW_PRIVATE must be "true" or "false", got "${env.BATON_HTTP_ALLOW_PRIVATE}"`;
    throw HttpPolicyInvalid([problem], { details: [problem] });
  }
  const policy: HttpPolicy = {
    allowHosts: list(env.BATON_HTTP_ALLOW_HOSTS),
    allowPrivate: rawPrivate === "true",
    allowPrivateHosts: list(env.BATON_HTTP_ALLOW_PRIVATE_HOSTS),
  };
  compileHttpPolicy(policy);
  return policy;
}

function matches(host: string, pattern: string): boolean {
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/** Checks a (normalized) host name against the allow-lists. Throws `BATON_TOOL_HTTP_HOST_REFUSED`. */
export function checkHostName(host: string, policy: CompiledHttpPolicy): void {
  if (policy.allowHosts.length === 0) return;
  if (policy.allowHosts.some((p) => matches(host, p)) || policy.allowPrivateHosts.some((p) => matches(host, p))) return;
  throw HttpHostRefused(host, "host is not in the allow-list");
}

/** Why an address is not public, or undefined when it is a public unicast address. */
export function nonPublicReason(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return "not an IP address";
  let ip = ipaddr.process(address);
  if (METADATA.has(ip.toString())) return "cloud metadata address";
  let range = ip.range();
  if (ip.kind() === "ipv6" && (range === "rfc6052" || range === "rfc6145")) {
    const parts = (ip as ipaddr.IPv6).parts;
    const v4 = new ipaddr.IPv4([parts[6]! >> 8, parts[6]! & 0xff, parts[7]! >> 8, parts[7]! & 0xff]);
    ip = v4;
    if (METADATA.has(v4.toString())) return "cloud metadata address";
    range = v4.range();
  }
  if (range === "unicast") return undefined;
  const names: Record<string, string> = {
    private: "private address",
    loopback: "loopback address",
    linkLocal: "link-local address",
    carrierGradeNat: "carrier-grade NAT address",
    multicast: "multicast address",
    uniqueLocal: "unique-local IPv6 address",
    unspecified: "unspecified address",
    broadcast: "broadcast address",
  };
  return `${names[range] ?? `${range} address`} ${ip.toString()}`;
}

/** Checks one resolved address of `host`. Throws `BATON_TOOL_HTTP_HOST_REFUSED`. */
export function checkAddress(host: string, address: string, policy: CompiledHttpPolicy): void {
  const reason = nonPublicReason(address);
  if (reason === undefined) return;
  if (policy.allowPrivateHosts.some((p) => matches(host, p))) return;
  if (policy.allowPrivate && !reason.startsWith("cloud metadata")) return;
  throw HttpHostRefused(host, `resolves to ${reason}${policy.allowPrivate ? "" : " (set allowPrivate or allowPrivateHosts to allow it)"}`);
}
