/**
 * OpenSSH known_hosts checking, as rclone does when `known_hosts_file` is set
 * (golang.org/x/crypto/ssh/knownhosts): the host must be listed, and the key it
 * presents must be one listed for it. Supported: comma-separated patterns with
 * `*`/`?` wildcards and `!` negation, hashed names (`|1|salt|hmac`), the
 * `[host]:port` form for non-22 ports, `@revoked`. `@cert-authority` lines are
 * ignored (no host certificates), so such a host counts as unknown.
 */
import { createHmac } from "node:crypto";

export interface KnownHostLine {
  marker: "" | "revoked" | "cert-authority";
  patterns: string;
  keyType: string;
  key: Buffer;
}

export function parseKnownHosts(text: string): KnownHostLine[] {
  const lines: KnownHostLine[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const fields = line.split(/\s+/);
    let marker: KnownHostLine["marker"] = "";
    if (fields[0] === "@revoked" || fields[0] === "@cert-authority") marker = fields.shift()!.slice(1) as KnownHostLine["marker"];
    if (fields.length < 3) continue;
    const key = Buffer.from(fields[2], "base64");
    if (key.length === 0) continue;
    lines.push({ marker, patterns: fields[0], keyType: fields[1], key });
  }
  return lines;
}

/** The name OpenSSH records: plain host on port 22, `[host]:port` otherwise. */
export function knownHostName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

function wildcardToRegExp(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "i");
}

function hashedMatches(entry: string, name: string): boolean {
  const [, kind, salt, hash] = entry.split("|");
  if (kind !== "1" || !salt || !hash) return false;
  const digest = createHmac("sha1", Buffer.from(salt, "base64")).update(name).digest("base64");
  return digest === hash;
}

/** Does the pattern list of one line name `name`? A matching negation vetoes the line. */
export function patternsMatch(patterns: string, name: string): boolean {
  if (patterns.startsWith("|")) return hashedMatches(patterns, name);
  let matched = false;
  for (const pattern of patterns.split(",")) {
    const negated = pattern.startsWith("!");
    if (wildcardToRegExp(negated ? pattern.slice(1) : pattern).test(name)) {
      if (negated) return false;
      matched = true;
    }
  }
  return matched;
}

export type HostKeyVerdict = "ok" | "unknown" | "mismatch" | "revoked";

/** Plain (unmarked) keys listed for `host`:`port`. */
export function keysForHost(lines: KnownHostLine[], host: string, port: number): { trusted: KnownHostLine[] } {
  const name = knownHostName(host, port);
  return { trusted: lines.filter((l) => l.marker === "" && patternsMatch(l.patterns, name)) };
}

/** `key` is the host key blob in SSH wire format, as ssh2's hostVerifier receives it. */
export function verifyHostKey(lines: KnownHostLine[], host: string, port: number, key: Buffer): HostKeyVerdict {
  // A revoked key is refused whatever host name its line carries.
  if (lines.some((l) => l.marker === "revoked" && l.key.equals(key))) return "revoked";
  const { trusted } = keysForHost(lines, host, port);
  if (trusted.length === 0) return "unknown";
  return trusted.some((l) => l.key.equals(key)) ? "ok" : "mismatch";
}

/**
 * Host key algorithms to offer, strongest first, limited to the key types
 * known for this host, so the server presents a key we can check (OpenSSH's
 * client does the same); an empty list means "no preference".
 */
export function preferredHostKeyAlgorithms(lines: KnownHostLine[], host: string, port: number): string[] {
  const types = new Set(keysForHost(lines, host, port).trusted.map((l) => l.keyType));
  const order: [string, string[]][] = [
    ["ssh-ed25519", ["ssh-ed25519"]],
    ["ecdsa-sha2-nistp521", ["ecdsa-sha2-nistp521"]],
    ["ecdsa-sha2-nistp384", ["ecdsa-sha2-nistp384"]],
    ["ecdsa-sha2-nistp256", ["ecdsa-sha2-nistp256"]],
    ["ssh-rsa", ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]],
  ];
  return order.filter(([type]) => types.has(type)).flatMap(([, algorithms]) => algorithms);
}
