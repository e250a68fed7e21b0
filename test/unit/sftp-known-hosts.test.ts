/**
 * OpenSSH known_hosts checking for SFTP channels (src/channels/drivers/sftp/known-hosts.ts). Which
 * lines name a host is judged against OpenSSH itself: `ssh-keygen -F` reports the lines it matches
 * for a name, over generated pattern lists (wildcards, negations, `[host]:port`, case) and over
 * lines `ssh-keygen -H` hashed. The verdicts and the parser are tables.
 */
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { knownHostName, parseKnownHosts, patternsMatch, preferredHostKeyAlgorithms, verifyHostKey } from "../../src/channels/drivers/sftp/known-hosts";
import { FUZZ_SEED } from "../fuzz/fuzz-support";

const dir = mkdtempSync(join(tmpdir(), "kura-known-hosts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const KEY_A = "AAAAC3NzaC1lZDI1NTE5AAAAIGay3E5drHhgmvFwM73cL7ApBfLFr/VW1kzfVk8HCMDz";
const KEY_B = "AAAAC3NzaC1lZDI1NTE5AAAAIAm6tuLu1TO1bfWDNo5M8PKF6NwRcPJnO0FJpGqH0Wqm";
const blob = (base64: string) => Buffer.from(base64, "base64");

/** The 1-based numbers of the lines of `file` that OpenSSH's matcher finds for `name`. */
function opensshMatches(file: string, name: string): number[] {
  const run = Bun.spawnSync(["ssh-keygen", "-F", name, "-f", file], { stdout: "pipe", stderr: "pipe" });
  return [...run.stdout.toString().matchAll(/^# Host .* found: line (\d+)/gm)].map((m) => Number(m[1]));
}

describe("which lines name a host, as OpenSSH decides", () => {
  const label = fc.constantFrom("a", "b", "db", "example", "com", "10", "0", "5", "A", "Example");
  const wildLabel = fc.oneof({ weight: 3, arbitrary: label }, { weight: 1, arbitrary: fc.constantFrom("*", "?", "a*", "*b", "1?", "d?") });
  const hostPattern = fc.array(wildLabel, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("."));
  const pattern = fc
    .tuple(fc.boolean(), hostPattern, fc.constantFrom(undefined, "2222", "22", "2?22"))
    .map(([negated, host, port]) => `${negated ? "!" : ""}${port ? `[${host}]:${port}` : host}`);
  const patternList = fc.array(pattern, { minLength: 1, maxLength: 3 }).map((list) => list.join(","));
  const hostName = fc.array(label, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("."));

  test("generated pattern lists: a name matches exactly the lines ssh-keygen -F finds for it", () => {
    let matchedSomewhere = 0;
    fc.assert(
      fc.property(
        fc.array(patternList, { minLength: 20, maxLength: 20 }),
        fc.array(fc.tuple(hostName, fc.constantFrom(22, 2222)), { minLength: 6, maxLength: 6 }),
        (lists, hosts) => {
          const file = join(dir, "generated");
          writeFileSync(file, lists.map((p) => `${p} ssh-ed25519 ${KEY_A}\n`).join(""));
          for (const [host, port] of hosts) {
            const name = knownHostName(host, port);
            const ours = lists.flatMap((p, i) => (patternsMatch(p, name) ? [i + 1] : []));
            expect({ name, lines: ours }).toEqual({ name, lines: opensshMatches(file, name) });
            if (ours.length) matchedSomewhere++;
          }
        },
      ),
      { seed: FUZZ_SEED, numRuns: 15, endOnFailure: true },
    );
    // The generators reach matches, or the agreement above is only about refusals.
    expect(matchedSomewhere).toBeGreaterThan(5);
  });

  test("a matching negation vetoes its line whatever else matches, in any order", () => {
    const lists = ["*.example.com,!bad.example.com", "!bad.example.com,*.example.com", "!*.com,*", "*,!a.*", "!a.example.com"];
    const file = join(dir, "negations");
    writeFileSync(file, lists.map((p) => `${p} ssh-ed25519 ${KEY_A}\n`).join(""));
    const names = ["a.example.com", "bad.example.com", "b.example.org", "[a.example.com]:2222"];
    const ours = names.map((name) => lists.flatMap((p, i) => (patternsMatch(p, name) ? [i + 1] : [])));
    expect(ours).toEqual(names.map((name) => opensshMatches(file, name)));
    expect(ours).toEqual([[1, 2], [4], [3, 4], [3, 4]]);
  });

  test("lines hashed by ssh-keygen -H match their own name (and port form) only", () => {
    const file = join(dir, "hashed");
    writeFileSync(file, `db.example.com ssh-ed25519 ${KEY_A}\n[db.example.com]:2222 ssh-ed25519 ${KEY_B}\n`);
    const hashing = Bun.spawnSync(["ssh-keygen", "-H", "-f", file], { stdout: "pipe", stderr: "pipe" });
    expect(hashing.exitCode).toBe(0);
    const lines = parseKnownHosts(readFileSync(file, "utf8"));
    expect(lines.map((l) => l.patterns.startsWith("|1|"))).toEqual([true, true]);
    expect(lines.map((l) => patternsMatch(l.patterns, "db.example.com"))).toEqual([true, false]);
    expect(lines.map((l) => patternsMatch(l.patterns, "[db.example.com]:2222"))).toEqual([false, true]);
    expect(lines.map((l) => patternsMatch(l.patterns, "other.example.com"))).toEqual([false, false]);
    // Malformed hashed entries name nothing.
    for (const bad of ["|1||aGFzaA==", "|1|c2FsdA==|", "|1|c2FsdA=="]) expect(patternsMatch(bad, "db.example.com")).toBe(false);
    // Only format 1 is known: the same salt and HMAC under another format number name nothing.
    const [, , salt, hash] = lines[0]!.patterns.split("|");
    expect(patternsMatch(`|1|${salt}|${hash}`, "db.example.com")).toBe(true);
    expect(patternsMatch(`|2|${salt}|${hash}`, "db.example.com")).toBe(false);
  });
});

describe("the file and the verdicts", () => {
  test("parsing keeps key lines with their marker; comments, blanks, short lines and empty keys are skipped", () => {
    const text = [
      "# a comment",
      "",
      `   db.example.com ssh-ed25519 ${KEY_A} trailing comment`,
      `@revoked * ssh-ed25519 ${KEY_B}`,
      `@cert-authority *.example.com ssh-ed25519 ${KEY_A}`,
      "short.example.com ssh-ed25519",
      "empty.example.com ssh-ed25519 ====",
      `crlf.example.com\tssh-ed25519\t${KEY_B}\r`,
      `spaced.example.com  ssh-ed25519 \t ${KEY_A}`,
    ].join("\r\n");
    expect(parseKnownHosts(text).map((l) => [l.marker, l.patterns, l.keyType, l.key.toString("base64")])).toEqual([
      ["", "db.example.com", "ssh-ed25519", KEY_A],
      ["revoked", "*", "ssh-ed25519", KEY_B],
      ["cert-authority", "*.example.com", "ssh-ed25519", KEY_A],
      ["", "crlf.example.com", "ssh-ed25519", KEY_B],
      ["", "spaced.example.com", "ssh-ed25519", KEY_A],
    ]);
  });

  test("ok, mismatch, unknown and revoked; a certificate authority's line trusts nobody here", () => {
    const lines = parseKnownHosts(
      [
        `db.example.com ssh-ed25519 ${KEY_A}`,
        `[db.example.com]:2222 ssh-ed25519 ${KEY_B}`,
        `@cert-authority *.example.com ssh-ed25519 ${KEY_A}`,
        `@revoked elsewhere.example.org ssh-ed25519 ${KEY_B}`,
      ].join("\n"),
    );
    expect(verifyHostKey(lines, "db.example.com", 22, blob(KEY_A))).toBe("ok");
    expect(verifyHostKey(lines, "DB.Example.com", 22, blob(KEY_A))).toBe("ok");
    expect(verifyHostKey(lines, "db.example.com", 2222, blob(KEY_A))).toBe("mismatch");
    expect(verifyHostKey(lines, "web.example.com", 22, blob(KEY_A))).toBe("unknown");
    // A host with two keys listed: either one is its key.
    const keyC = Buffer.from("a third host key blob, for this test").toString("base64");
    const twoKeys = [...lines, ...parseKnownHosts(`db.example.com ssh-ed25519 ${keyC}`)];
    expect([verifyHostKey(twoKeys, "db.example.com", 22, blob(KEY_A)), verifyHostKey(twoKeys, "db.example.com", 22, blob(keyC))]).toEqual(["ok", "ok"]);
    // Revoked wherever it is presented, even by a host whose own line lists it.
    const revokedToo = [...lines, ...parseKnownHosts(`@revoked nothing.example ssh-ed25519 ${KEY_A}`)];
    expect(verifyHostKey(revokedToo, "db.example.com", 22, blob(KEY_A))).toBe("revoked");
    expect(verifyHostKey(lines, "db.example.com", 2222, blob(KEY_B))).toBe("revoked");
  });

  test("host key algorithms offered: the types listed for the host, strongest first, RSA as its SHA-2 signatures first", () => {
    const lines = parseKnownHosts(
      [
        `db.example.com ssh-rsa ${KEY_A}`,
        `db.example.com ecdsa-sha2-nistp256 ${KEY_A}`,
        `db.example.com ssh-ed25519 ${KEY_A}`,
        `db.example.com ecdsa-sha2-nistp521 ${KEY_A}`,
        `db2.example.com ecdsa-sha2-nistp384 ${KEY_A}`,
        `other.example.com ecdsa-sha2-nistp521 ${KEY_A}`,
        `@revoked db.example.com ecdsa-sha2-nistp384 ${KEY_A}`,
      ].join("\n"),
    );
    expect(preferredHostKeyAlgorithms(lines, "db.example.com", 22)).toEqual([
      "ssh-ed25519",
      "ecdsa-sha2-nistp521",
      "ecdsa-sha2-nistp256",
      "rsa-sha2-512",
      "rsa-sha2-256",
      "ssh-rsa",
    ]);
    expect(preferredHostKeyAlgorithms(lines, "db2.example.com", 22)).toEqual(["ecdsa-sha2-nistp384"]);
    expect(preferredHostKeyAlgorithms(lines, "new.example.com", 22)).toEqual([]);
  });
});
