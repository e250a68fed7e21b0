import type { AddressSet } from "../net/cidr";
import { isIP } from "node:net";
import { normalizeAddress } from "../net/cidr";
import { badRequest } from "./errors";

/**
 * Client address rules (README "Client address"):
 * - the TCP peer is the client unless it is in KURA_TRUSTED_PROXIES;
 * - when it is trusted, X-Forwarded-For is read right to left, skipping trusted
 *   hops; the first untrusted address is the client (the leftmost if all are trusted);
 * - X-Forwarded-Proto is believed only from a trusted peer.
 */
export function resolveClientAddress(peer: string, headers: Headers, trusted: AddressSet): string {
  const direct = normalizeAddress(peer);
  if (!trusted.has(direct)) return direct;
  const forwarded = (headers.get("x-forwarded-for") ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  // The hop that reported each entry: the direct peer for the rightmost one.
  let reporter = direct;
  for (let i = forwarded.length - 1; i >= 0; i--) {
    const address = forwardedAddress(forwarded[i]!);
    // Not an address: nothing left of it can be believed, so the (trusted) hop that wrote it
    // stands for the client. As written, every `ip:port` or bit of text was a client of its own
    // (a fresh login-throttle bucket per source port behind proxies that append the port).
    if (address === undefined) return reporter;
    if (!trusted.has(address)) return address;
    reporter = address;
  }
  return reporter;
}

/**
 * An X-Forwarded-For entry as an address: bare, or with the port some proxies append
 * (`203.0.113.9:4711`, `[2001:db8::1]:4711`, as Azure Application Gateway and IIS ARR send it).
 */
export function forwardedAddress(entry: string): string | undefined {
  const withPort = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry) ?? /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(entry);
  if (withPort?.[2] !== undefined && Number(withPort[2]) > 65_535) return undefined;
  const address = normalizeAddress(withPort?.[1] ?? entry);
  return isIP(address) ? address : undefined;
}

export function isSecureRequest(request: Request, peer: string, trusted: AddressSet): boolean {
  // The URL's scheme without parsing it: a URL Bun could not build from the Host is a bare path.
  if (request.url.startsWith("https:")) return true;
  if (!trusted.has(normalizeAddress(peer))) return false;
  const proto = request.headers.get("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase();
  return proto === "https";
}

/** Per-request facts computed once by the server wrapper. */
export interface RequestInfo {
  peer: string;
  client: string;
  secure: boolean;
  /** Route template set by the router, for metrics. */
  route?: string;
}

const infos = new WeakMap<Request, RequestInfo>();

export function setRequestInfo(request: Request, info: RequestInfo) {
  infos.set(request, info);
}

export function requestInfo(request: Request): RequestInfo {
  return infos.get(request) ?? { peer: "", client: "", secure: false };
}

/** Absolute origin for links: base_url when set, else derived from the request. */
export function publicOrigin(request: Request, baseUrl: string): string {
  if (baseUrl) return baseUrl;
  const url = new URL(request.url);
  const info = requestInfo(request);
  const host = request.headers.get("host") ?? url.host;
  return `${info.secure ? "https" : url.protocol.replace(":", "")}://${host}`;
}

export const HOST_REQUIRED = "请求头 Host 缺失或无效";

/** RFC 3986 `host [":" port]`: an IP literal or a registered name (ASCII, percent-encoded). */
const HOST_SYNTAX = /^(?:\[[\dA-Fa-f:.]+\]|[\w.~!$&'()*+,;=%-]+)(?::\d*)?$/;

/**
 * Whether the Host header can make a URL: present, one value (a repeated Host arrives joined
 * with ", "), RFC 3986 syntax, and a WHATWG URL host with a port in range. Bun turns what it
 * cannot parse into a bare-path URL, but passes some values it cannot parse either (`a:99999`,
 * `a%20b`), so the header itself is judged.
 */
export function usableHost(host: string | null): boolean {
  return !!host && HOST_SYNTAX.test(host) && URL.canParse(`http://${host}/`);
}

/**
 * Routes need a usable Host (RFC 9112 §3.2: 400 without one): links are built from it, S3
 * signatures cover it, handlers parse the URL. `/healthz` answers without one (HAProxy's
 * `option httpchk` sends HTTP/1.0 without Host); `/i/` never gets here (image-fast-path.ts),
 * its answer does not depend on the Host.
 */
export function requireUsableHost(request: Request, path: string): void {
  if (path !== "/healthz" && !usableHost(request.headers.get("host"))) throw badRequest(HOST_REQUIRED);
}
