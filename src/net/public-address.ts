import { isIP } from "node:net";
import { normalizeAddress, parseAddressSet, type AddressSet } from "./cidr";

/**
 * Decides whether a resolved address is a public Internet destination that the
 * URL importer may connect to. Everything else (loopback, private, link-local,
 * CGNAT, multicast, reserved, documentation, ULA…) is refused so that an
 * "import from URL" request cannot be turned into a probe of the server's own
 * network (SSRF). IPv6 forms that carry an IPv4 address (mapped, compatible,
 * NAT64, 6to4) are judged by the IPv4 address they carry.
 */

export type RefusalReason =
  | "invalid"
  | "unspecified"
  | "loopback"
  | "private"
  | "link-local"
  | "shared"
  | "multicast"
  | "reserved"
  | "documentation"
  | "unique-local";

/** Refused IPv4 networks, checked in order (the first match names the reason). */
const V4_RULES: ReadonlyArray<[RefusalReason, AddressSet]> = [
  ["unspecified", parseAddressSet("0.0.0.0/8")],
  ["loopback", parseAddressSet("127.0.0.0/8")],
  ["private", parseAddressSet("10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16")],
  ["link-local", parseAddressSet("169.254.0.0/16")],
  ["shared", parseAddressSet("100.64.0.0/10")], // CGNAT, RFC 6598
  ["multicast", parseAddressSet("224.0.0.0/4")],
  ["documentation", parseAddressSet("192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24")],
  // IETF protocol assignments, deprecated 6to4 relay anycast, benchmarking,
  // and 240/4 "future use" which also holds the limited broadcast 255.255.255.255.
  ["reserved", parseAddressSet("192.0.0.0/24, 192.88.99.0/24, 198.18.0.0/15, 240.0.0.0/4")],
];

/** Refused IPv6 networks inside 2000::/3; everything outside 2000::/3 is refused anyway. */
const V6_RULES: ReadonlyArray<[RefusalReason, AddressSet]> = [
  ["documentation", parseAddressSet("2001:db8::/32, 3fff::/20")],
  // 2001::/23 holds Teredo (2001::/32, embeds an obfuscated IPv4), benchmarking
  // and ORCHID; no image host lives there. 5f00::/16 is SRv6 SIDs.
  ["reserved", parseAddressSet("2001::/23, 5f00::/16")],
];
const V6_GLOBAL_UNICAST = parseAddressSet("2000::/3");

/** Returns why `ip` is refused, or null when it is a public address. */
export function refusalReason(ip: string): RefusalReason | null {
  const address = normalizeAddress(ip);
  const family = isIP(address);
  if (family === 4) return v4Refusal(address);
  if (family !== 6) return "invalid";
  const words = parseIpv6(address);
  if (!words) return "invalid";
  const embedded = embeddedIpv4(words);
  if (embedded) return v4Refusal(embedded);
  if (words.every((w) => w === 0)) return "unspecified";
  if (words.slice(0, 7).every((w) => w === 0) && words[7] === 1) return "loopback";
  const top = words[0]!;
  if ((top & 0xfe00) === 0xfc00) return "unique-local"; // fc00::/7
  if ((top & 0xffc0) === 0xfe80) return "link-local"; // fe80::/10
  if ((top & 0xff00) === 0xff00) return "multicast"; // ff00::/8
  for (const [reason, set] of V6_RULES) if (set.has(address)) return reason;
  // Only 2000::/3 is allocated for global unicast; the rest (fec0::/10 site-local,
  // 100::/64 discard, 64:ff9b:1::/48 local NAT64, unassigned space) is not a public host.
  return V6_GLOBAL_UNICAST.has(address) ? null : "reserved";
}

export function isPublicAddress(ip: string): boolean {
  return refusalReason(ip) === null;
}

function v4Refusal(address: string): RefusalReason | null {
  for (const [reason, set] of V4_RULES) if (set.has(address)) return reason;
  return null;
}

/**
 * The IPv4 address carried by an IPv6 address in one of the forms that make a
 * connection reach that IPv4 host, or null:
 *   ::a.b.c.d (compatible), ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (translated),
 *   64:ff9b::a.b.c.d (NAT64 well-known prefix), 2002:AABB:CCDD:: (6to4).
 * :: and ::1 are not IPv4-compatible addresses; the caller judges them itself.
 */
function embeddedIpv4(w: number[]): string | null {
  const zeros = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  if (zeros(0, 5) && w[5] === 0xffff) return dotted(w[6]!, w[7]!);
  if (zeros(0, 4) && w[4] === 0xffff && w[5] === 0) return dotted(w[6]!, w[7]!);
  if (zeros(0, 6) && (w[6] !== 0 || w[7]! > 1)) return dotted(w[6]!, w[7]!);
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return dotted(w[6]!, w[7]!);
  if (w[0] === 0x2002) return dotted(w[1]!, w[2]!);
  return null;
}

/** Parses a textual IPv6 address (already validated by isIP) into 8 16-bit words. */
function parseIpv6(address: string): number[] | null {
  let text = address.toLowerCase();
  const tail: number[] = [];
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const b = v4.slice(1).map(Number);
    tail.push((b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!);
    text = `${text.slice(0, v4.index)}0`; // placeholder word, dropped below
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const parse = (part: string) => (part ? part.split(":").map((h) => parseInt(h, 16)) : []);
  const left = parse(head);
  const right = rest === undefined ? [] : parse(rest);
  if (v4) (rest === undefined ? left : right).pop();
  const fill = 8 - tail.length - left.length - right.length;
  if (fill < 0 || (rest === undefined && fill !== 0)) return null;
  const words = [...left, ...new Array<number>(fill).fill(0), ...right, ...tail];
  return words.length === 8 && words.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffff) ? words : null;
}
