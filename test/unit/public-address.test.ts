import { describe, expect, test } from "bun:test";
import { isPublicAddress, refusalReason, type RefusalReason } from "../../src/net/public-address.ts";

const PUBLIC = [
  "1.1.1.1",
  "8.8.8.8",
  "93.184.216.34",
  "100.63.255.255", // just below CGNAT
  "100.128.0.0", // just above CGNAT
  "172.15.255.255", // just below 172.16/12
  "172.32.0.0", // just above 172.16/12
  "192.0.1.1", // outside 192.0.0.0/24
  "198.20.0.1", // just above 198.18/15
  "223.255.255.255",
  "2606:4700::1111",
  "2001:4860:4860::8888",
  "2a00:1450:4001:82b::200e",
  "::ffff:1.1.1.1", // mapped public v4
  "::ffff:101:101", // same, hex form
  "64:ff9b::8.8.8.8", // NAT64 of a public v4
  "2002:808:808::1", // 6to4 of 8.8.8.8
];

const REFUSED: Array<[string, RefusalReason]> = [
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "unspecified"],
  ["10.1.2.3", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["169.254.169.254", "link-local"],
  ["100.64.0.1", "shared"],
  ["100.127.255.255", "shared"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "reserved"],
  ["192.0.0.8", "reserved"],
  ["198.18.0.1", "reserved"],
  ["198.19.255.255", "reserved"],
  ["192.0.2.1", "documentation"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["::1", "loopback"],
  ["[::1]", "loopback"],
  ["::", "unspecified"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["febf::1", "link-local"],
  ["fc00::1", "unique-local"],
  ["fd12:3456::1", "unique-local"],
  ["ff02::1", "multicast"],
  ["fec0::1", "reserved"], // deprecated site-local
  ["100::1", "reserved"], // discard-only
  ["2001:db8::1", "documentation"],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"], // Teredo
  // IPv4 hidden inside IPv6: judged by the IPv4 it carries
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::FFFF:A9FE:A9FE", "link-local"],
  ["::ffff:0:10.0.0.1", "private"], // IPv4-translated
  ["::127.0.0.1", "loopback"], // IPv4-compatible
  ["::a00:1", "private"],
  ["::0.0.0.2", "unspecified"],
  ["64:ff9b::127.0.0.1", "loopback"], // NAT64
  ["64:ff9b::a9fe:a9fe", "link-local"],
  ["64:ff9b:1::1", "reserved"], // local-use NAT64
  ["2002:7f00:1::", "loopback"], // 6to4
  ["2002:c0a8:101::1", "private"],
  ["2002:a9fe:a9fe:1234::1", "link-local"],
  ["not-an-ip", "invalid"],
  ["", "invalid"],
  ["1.2.3", "invalid"],
  ["localhost", "invalid"],
];

describe("isPublicAddress", () => {
  test.each(PUBLIC)("%s is public", (ip) => {
    expect(refusalReason(ip)).toBeNull();
    expect(isPublicAddress(ip)).toBe(true);
  });

  test.each(REFUSED)("%s is refused (%s)", (ip, reason) => {
    expect(refusalReason(ip)).toBe(reason);
    expect(isPublicAddress(ip)).toBe(false);
  });
});
