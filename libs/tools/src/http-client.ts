/**
 * The guarded HTTP client behind `http.request`, HTTP tools declared without code and MCP
 * servers reached over HTTP.
 *
 * Invariant: a connection only ever goes to an address that passed the policy. The client
 * resolves the host itself, checks every address, and hands node:http a `lookup` that can
 * only answer with those checked addresses, so a second DNS answer (rebinding) is never
 * used. Each redirect target goes through the same steps.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { Readable } from "node:stream";
import zlib from "node:zlib";
import { hasCode } from "@baton/errors";
import { ToolInvalidInput } from "@baton/sdk";
import {
  HttpHostRefused,
  HttpNetworkError,
  HttpRedirectError,
  HttpResponseTooLarge,
  HttpTimeout,
  ToolAborted,
} from "./errors.ts";
import {
  checkAddress,
  checkHostName,
  compileHttpPolicy,
  normalizeHost,
  type CompiledHttpPolicy,
  type HttpPolicy,
  type ResolvedAddress,
} from "./policy.ts";

export interface GuardedRequest {
  method: string;
  url: string | URL;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Whole-request limit (DNS, connect, redirects and, in buffered mode, the body). Capped by the policy's `maxTimeoutMs`. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** @default "follow" */
  redirect?: "follow" | "manual" | "error";
}

export interface GuardedResponse {
  status: number;
  headers: Record<string, string>;
  /** The URL that answered (after redirects). */
  url: string;
  body: Buffer;
}

interface OpenResponse {
  status: number;
  rawHeaders: http.IncomingHttpHeaders;
  url: URL;
  /** Decoded body stream. */
  stream: Readable;
  decoded: boolean;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const CREDENTIAL_HEADERS = ["authorization", "cookie", "proxy-authorization"];
const PERMANENT_NET = new Set(["ENOTFOUND", "ENODATA", "ERR_INVALID_URL"]);

/** The error for an aborted signal: its reason when that is a Baton error (timeout, cancel, drain), else `BATON_TOOL_ABORTED`. */
export function abortError(signal: AbortSignal, tool: string): Error {
  const reason: unknown = signal.reason;
  if (hasCode(reason)) return reason;
  return ToolAborted(tool, reason instanceof Error ? reason.message : "cancelled", { cause: reason });
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal, tool: string): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal, tool));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal, tool));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => (signal.removeEventListener("abort", onAbort), resolve(v)),
      (e: unknown) => (signal.removeEventListener("abort", onAbort), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });
}

async function resolveChecked(url: URL, policy: CompiledHttpPolicy, signal: AbortSignal, tool: string): Promise<ResolvedAddress[]> {
  const host = normalizeHost(url.hostname);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw HttpHostRefused(host || url.href, `scheme ${url.protocol} is not http or https`);
  if (url.username || url.password) throw HttpHostRefused(host, "credentials in the URL are not allowed; use an Authorization header");
  checkHostName(host, policy);
  let addresses: ResolvedAddress[];
  const family = isIP(host);
  if (family !== 0) {
    addresses = [{ address: host, family: family as 4 | 6 }];
  } else {
    try {
      const resolve = policy.resolve ?? ((h: string) => dnsLookup(h, { all: true, order: "verbatim" }) as Promise<ResolvedAddress[]>);
      const dnsLimit = AbortSignal.timeout(policy.connectTimeoutMs);
      const dnsSignal = AbortSignal.any([signal, dnsLimit]);
      try {
        addresses = await raceAbort(resolve(host), dnsSignal, tool);
      } catch (err) {
        if (dnsLimit.aborted && !signal.aborted) throw HttpTimeout(`resolving ${host}`, url.origin, policy.connectTimeoutMs);
        throw err;
      }
    } catch (err) {
      if (hasCode(err)) throw err;
      const code = (err as { code?: string }).code ?? "";
      throw HttpNetworkError(url.origin, `cannot resolve ${host}: ${code || String(err)}`, { cause: err, retryable: !PERMANENT_NET.has(code) });
    }
    if (addresses.length === 0) throw HttpNetworkError(url.origin, `${host} has no address`, { retryable: false });
  }
  for (const a of addresses) checkAddress(host, a.address, policy);
  return addresses;
}

function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    const usable = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    if (usable.length === 0) {
      const err = Object.assign(new Error("no checked address of the requested family"), { code: "ENOTFOUND" });
      callback(err, "", 0);
      return;
    }
    if (options.all) (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, usable);
    else callback(null, usable[0]!.address, usable[0]!.family);
  };
}

function networkError(err: unknown, url: URL): Error {
  if (hasCode(err)) return err;
  const code = (err as { code?: string }).code ?? "";
  const tls = code.startsWith("ERR_TLS") || code.includes("CERT") || code.startsWith("UNABLE_TO");
  const message = err instanceof Error ? err.message : String(err);
  return HttpNetworkError(url.origin, code ? `${code}: ${message}` : message, { cause: err, retryable: !tls });
}

function decode(res: http.IncomingMessage): { stream: Readable; decoded: boolean } {
  const enc = String(res.headers["content-encoding"] ?? "").trim().toLowerCase();
  const decoder =
    enc === "gzip" || enc === "x-gzip" ? zlib.createGunzip()
    : enc === "deflate" ? zlib.createInflate()
    : enc === "br" ? zlib.createBrotliDecompress()
    : undefined;
  if (!decoder) return { stream: res, decoded: false };
  res.on("error", (e) => decoder.destroy(e));
  return { stream: res.pipe(decoder), decoded: true };
}

function hop(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Uint8Array | undefined,
  addresses: ResolvedAddress[],
  policy: CompiledHttpPolicy,
  signal: AbortSignal,
  tool: string,
): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === "https:";
    const hostname = normalizeHost(url.hostname);
    const options: https.RequestOptions = {
      hostname,
      port: url.port || (secure ? 443 : 80),
      path: url.pathname + url.search,
      method,
      headers,
      agent: false,
      lookup: pinnedLookup(addresses),
      ...(secure && isIP(hostname) === 0 ? { servername: hostname } : {}),
    };
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      reject(err);
    };
    let req: http.ClientRequest;
    try {
      req = (secure ? https : http).request(options, (res) => {
        settled = true;
        resolve(res);
      });
    } catch (err) {
      // Invalid header names or values, an invalid method: the caller's input.
      return fail(ToolInvalidInput(tool, `cannot send the request: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
    }
    const onAbort = (): void => {
      const err = abortError(signal, tool);
      req.destroy(err);
      fail(err);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    req.once("close", () => signal.removeEventListener("abort", onAbort));
    req.on("error", (err) => fail(signal.aborted ? abortError(signal, tool) : networkError(err, url)));
    req.on("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(() => {
        const err = HttpTimeout("connecting", url.origin, policy.connectTimeoutMs);
        req.destroy(err);
        fail(err);
      }, policy.connectTimeoutMs);
      socket.once(secure ? "secureConnect" : "connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
    req.end(body);
  });
}

async function open(request: GuardedRequest, policy: CompiledHttpPolicy, signal: AbortSignal, tool: string): Promise<OpenResponse> {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw HttpHostRefused(String(request.url), "not a valid URL");
  }
  let method = request.method.toUpperCase();
  let headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(request.headers ?? {})) headers[k.toLowerCase()] = v;
  headers["accept-encoding"] ??= "gzip, deflate, br";
  let body = request.body;
  const mode = request.redirect ?? "follow";
  for (let redirects = 0; ; redirects++) {
    const addresses = await resolveChecked(url, policy, signal, tool);
    const res = await hop(url, method, headers, body, addresses, policy, signal, tool);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (!REDIRECTS.has(status) || location === undefined || mode === "manual") {
      const { stream, decoded } = decode(res);
      return { status, rawHeaders: res.headers, url, stream, decoded };
    }
    res.resume();
    if (mode === "error") throw HttpRedirectError(url.href, `answered ${status} and redirects are not followed`);
    if (redirects >= policy.maxRedirects) throw HttpRedirectError(url.href, `more than ${policy.maxRedirects} redirects`);
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw HttpRedirectError(url.href, `Location "${location}" is not a valid URL`);
    }
    if ((status === 303 && method !== "HEAD") || ((status === 301 || status === 302) && method === "POST")) {
      method = "GET";
      body = undefined;
      const { "content-type": _t, "content-length": _l, ...rest } = headers;
      headers = rest;
    }
    if (next.origin !== url.origin) for (const h of CREDENTIAL_HEADERS) delete headers[h];
    url = next;
  }
}

function flatHeaders(raw: http.IncomingHttpHeaders, decoded: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined) continue;
    if (decoded && (k === "content-encoding" || k === "content-length")) continue;
    out[k] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

async function readCapped(stream: Readable, limit: number, url: URL, signal: AbortSignal, tool: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const onAbort = (): void => void stream.destroy(abortError(signal, tool));
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > limit) {
        stream.destroy();
        throw HttpResponseTooLarge(url.href, limit);
      }
      chunks.push(buf);
    }
  } catch (err) {
    if (hasCode(err)) throw err;
    if (signal.aborted) throw abortError(signal, tool);
    throw networkError(err, url);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
  return Buffer.concat(chunks);
}

function deadline(request: GuardedRequest, policy: CompiledHttpPolicy, urlText: string): { signal: AbortSignal; clear(): void; ms: number } {
  const ms = Math.min(request.timeoutMs ?? policy.defaultTimeoutMs, policy.maxTimeoutMs);
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(HttpTimeout("request", urlText, ms)), ms);
  const signal = request.signal ? AbortSignal.any([ac.signal, request.signal]) : ac.signal;
  return { signal, ms, clear: () => clearTimeout(timer) };
}

/** An HTTP client bound to one policy. */
export interface GuardedHttpClient {
  readonly policy: CompiledHttpPolicy;
  /** Sends the request and reads the whole (decoded) body, at most `maxResponseBytes`. Never throws on a status. */
  request(request: GuardedRequest, tool?: string): Promise<GuardedResponse>;
  /**
   * A `fetch` look-alike over the same guard, streaming the body (no size cap, no whole-request timeout:
   * for long-lived streams such as MCP's). Honours `init.signal` and `init.redirect`.
   */
  fetch(url: string | URL, init?: RequestInit): Promise<Response>;
}

function bodyOf(body: RequestInit["body"]): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (body instanceof URLSearchParams) return body.toString();
  throw new TypeError("guarded fetch supports string, Uint8Array, ArrayBuffer and URLSearchParams bodies");
}

/** Builds a client that enforces `policy` on every request. */
export function createHttpClient(policy: HttpPolicy | CompiledHttpPolicy = {}): GuardedHttpClient {
  const compiled = compileHttpPolicy(policy);
  return {
    policy: compiled,
    async request(request, tool = "http.request") {
      const urlText = String(request.url);
      const d = deadline(request, compiled, urlText);
      try {
        const res = await open(request, compiled, d.signal, tool);
        const declared = Number(res.rawHeaders["content-length"]);
        if (!res.decoded && Number.isFinite(declared) && declared > compiled.maxResponseBytes) {
          res.stream.destroy();
          throw HttpResponseTooLarge(res.url.href, compiled.maxResponseBytes);
        }
        const body = await readCapped(res.stream, compiled.maxResponseBytes, res.url, d.signal, tool);
        return { status: res.status, headers: flatHeaders(res.rawHeaders, res.decoded), url: res.url.href, body };
      } finally {
        d.clear();
      }
    },
    async fetch(input, init = {}) {
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((v, k) => (headers[k] = v));
      const signal = init.signal ?? new AbortController().signal;
      const redirect = init.redirect === "manual" || init.redirect === "error" ? init.redirect : "follow";
      const request: GuardedRequest = { method: init.method ?? "GET", url: input, headers, redirect };
      const b = bodyOf(init.body);
      if (b !== undefined) request.body = b;
      const res = await open(request, compiled, signal, "fetch");
      const out = new Headers();
      for (const [k, v] of Object.entries(res.rawHeaders)) {
        if (v === undefined || (res.decoded && (k === "content-encoding" || k === "content-length"))) continue;
        for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
      }
      const nullBody = [101, 204, 205, 304].includes(res.status) || request.method.toUpperCase() === "HEAD";
      if (nullBody) res.stream.resume();
      const onAbort = (): void => void res.stream.destroy(abortError(signal, "fetch"));
      signal.addEventListener("abort", onAbort, { once: true });
      res.stream.once("close", () => signal.removeEventListener("abort", onAbort));
      const body = nullBody ? null : (Readable.toWeb(res.stream) as ReadableStream<Uint8Array>);
      const response = new Response(body, { status: res.status, headers: out });
      Object.defineProperty(response, "url", { value: res.url.href });
      return response;
    },
  };
}
