// Hotlink protection (spec 4.5, 4.10): a Referer allowlist of bare domains (exact host) and
// `*.domain` patterns (subdomains only). Hosts compare in their ASCII (punycode) form, lower
// case, without port or trailing dot.

/**
 * Empty allowlist = protection off. A missing/empty Referer is decided by `allowEmpty`
 * (`allow_empty_referer`). A Referer that is not a URL with a host is refused: it cannot
 * match any rule, and treating garbage as "empty" would make the protection trivial to skip.
 */
export function refererAllowed(referer: string | null | undefined, patterns: readonly string[], allowEmpty: boolean): boolean {
  if (patterns.length === 0) return true;
  if (referer === null || referer === undefined || referer.trim() === "") return allowEmpty;
  const host = refererHost(referer.trim());
  if (host === null) return false;
  return patterns.some((p) => hostMatches(host, p));
}

/** Host of a Referer URL in comparable form, or null when there is none. */
export function refererHost(referer: string): string | null {
  let url: URL;
  try {
    url = new URL(referer);
  } catch {
    return null;
  }
  const host = normalizeHost(url.hostname);
  return host === "" ? null : host;
}

/** Patterns are normalized on save, but stay tolerant of hand-edited rows (case, dot). */
export function hostMatches(host: string, pattern: string): boolean {
  const p = pattern.trim().toLowerCase();
  if (p.startsWith("*.")) {
    const domain = normalizeHost(p.slice(2));
    // The leading "." is what keeps `badexample.com` out of `*.example.com`.
    return domain !== "" && host.length > domain.length + 1 && host.endsWith(`.${domain}`);
  }
  return host === normalizeHost(p);
}

function normalizeHost(h: string): string {
  let host = h.toLowerCase();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host.endsWith(".")) host = host.slice(0, -1);
  return host;
}

export class InvalidRefererPatternError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidRefererPatternError";
  }
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

/**
 * Validates an allowlist entry and returns its stored form: lower-case ASCII host (Unicode
 * names become punycode, as browsers send them), no trailing dot, optional `*.` prefix.
 * Rejects schemes, paths, ports, credentials, spaces, a bare `*` and wildcards elsewhere.
 * IP addresses are accepted as bare patterns (IPv6 with or without brackets).
 */
export function validateRefererPattern(input: string): string {
  const s = input.trim();
  if (s === "") throw new InvalidRefererPatternError("域名规则不能为空");
  if (/\s/.test(s)) throw new InvalidRefererPatternError("域名规则不能包含空格");
  if (s.includes("://") || /[/?#@\\%]/.test(s)) {
    throw new InvalidRefererPatternError("只需填写域名（如 example.com 或 *.example.com），不要包含协议、路径或参数");
  }
  const wildcard = s.startsWith("*.");
  let rest = wildcard ? s.slice(2) : s;
  if (rest.includes("*")) {
    throw new InvalidRefererPatternError("通配符只能以 *. 开头，表示匹配所有子域名（如 *.example.com）");
  }
  if (rest.endsWith(".")) rest = rest.slice(0, -1);
  if (rest === "") throw new InvalidRefererPatternError("域名规则缺少域名部分");

  const v6 = ipv6(rest);
  if (v6 !== null) {
    if (wildcard) throw new InvalidRefererPatternError("IP 地址不能使用通配符");
    return v6;
  }
  if (rest.includes(":")) throw new InvalidRefererPatternError("域名规则不能包含端口");

  let host: string;
  try {
    host = new URL(`http://${rest}/`).hostname; // IDNA: Unicode → punycode, lower case
  } catch {
    throw new InvalidRefererPatternError("域名格式无效");
  }
  if (host.endsWith(".")) host = host.slice(0, -1);
  if (IPV4.test(host)) {
    if (wildcard) throw new InvalidRefererPatternError("IP 地址不能使用通配符");
    return host;
  }
  if (host.length > 253 || !host.split(".").every((label) => LABEL.test(label))) {
    throw new InvalidRefererPatternError("域名格式无效");
  }
  return wildcard ? `*.${host}` : host;
}

/** Compressed IPv6 form without brackets, or null when `s` is not an IPv6 literal. */
function ipv6(s: string): string | null {
  const inner = s.startsWith("[") && s.endsWith("]") ? s.slice(1, -1) : s;
  if (!inner.includes(":") || !/^[0-9a-fA-F:.]+$/.test(inner)) return null;
  try {
    return normalizeHost(new URL(`http://[${inner}]/`).hostname);
  } catch {
    return null;
  }
}
