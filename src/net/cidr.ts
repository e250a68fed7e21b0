import { BlockList, isIP } from "node:net";

/** A set of addresses and networks, parsed from "1.2.3.4, 10.0.0.0/8, ::1, fd00::/8". */
export interface AddressSet {
  has(address: string): boolean;
  readonly entries: readonly string[];
}

export class CidrSyntaxError extends Error {}

/** Strips brackets and the IPv4-mapped prefix so "::ffff:10.0.0.1" is judged as 10.0.0.1. */
export function normalizeAddress(address: string): string {
  let a = address.trim();
  if (a.startsWith("[") && a.endsWith("]")) a = a.slice(1, -1);
  const zone = a.indexOf("%");
  if (zone >= 0) a = a.slice(0, zone);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  return mapped ? mapped[1]! : a;
}

export function parseAddressSet(list: string): AddressSet {
  const blocks = new BlockList();
  const entries: string[] = [];
  for (const raw of list.split(",")) {
    const item = raw.trim();
    if (!item) continue;
    const [addr, bits, extra] = item.split("/");
    const ip = normalizeAddress(addr ?? "");
    const family = isIP(ip);
    if (!family || extra !== undefined) throw new CidrSyntaxError(`无效的地址或网段: ${item}`);
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) {
      blocks.addAddress(ip, type);
    } else {
      const prefix = Number(bits);
      const max = family === 4 ? 32 : 128;
      if (!/^\d+$/.test(bits) || prefix > max) throw new CidrSyntaxError(`无效的网段前缀: ${item}`);
      blocks.addSubnet(ip, prefix, type);
    }
    entries.push(item);
  }
  return {
    entries,
    has(address: string) {
      const ip = normalizeAddress(address);
      const family = isIP(ip);
      if (!family) return false;
      return blocks.check(ip, family === 4 ? "ipv4" : "ipv6");
    },
  };
}

/** Loopback and private ranges: the default audience of /metrics. */
export const LOOPBACK_AND_PRIVATE = "127.0.0.0/8, ::1/128, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7";
