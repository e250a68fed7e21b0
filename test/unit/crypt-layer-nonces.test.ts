/**
 * Nonce uniqueness of the encrypted-channel layer, read from the stored ciphertext: every object
 * written through one channel (same key material) starts with its own 24-byte nonce — also for
 * identical plaintext under two keys and for an overwrite of the same key. A repeated nonce under
 * one key would let XSalsa20 keystreams cancel out between two objects.
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MasterKey } from "../../src/config/master-key.ts";
import { cryptPasswords, wrapEncrypted } from "../../src/channels/crypt-layer.ts";
import { createLocalDriver } from "../../src/channels/drivers/local.ts";
import { HEADER_SIZE, MAGIC, NONCE_SIZE } from "../../src/channels/rclone/crypt-data.ts";
import { readAll } from "../channels/conformance.ts";

const dir = await mkdtemp(join(tmpdir(), "kura-crypt-nonces-"));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** The stored objects' nonces, by their (encrypted) file path. */
function storedNonces(): Map<string, string> {
  const out = new Map<string, string>();
  for (const rel of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    const path = join(dir, rel);
    if (!statSync(path).isFile()) continue;
    const bytes = readFileSync(path);
    expect(bytes.length).toBeGreaterThanOrEqual(HEADER_SIZE);
    expect(Buffer.from(bytes.subarray(0, MAGIC.length)).equals(Buffer.from(MAGIC))).toBe(true);
    out.set(rel, bytes.subarray(MAGIC.length, MAGIC.length + NONCE_SIZE).toString("hex"));
  }
  return out;
}

test("every object on an encrypted channel gets its own nonce, identical plaintext and overwrites included", async () => {
  const layer = wrapEncrypted(createLocalDriver({ path: dir }), cryptPasswords(MasterKey.generate().key, 7, "2026-01-01 00:00:00"));
  const same = new Uint8Array(randomBytes(5000));
  const bodies: [string, Uint8Array][] = [
    ["img/a.jpg", same],
    ["img/b.jpg", same],
    ["img/c.jpg", new Uint8Array(randomBytes(1))],
    ["img/d.jpg", new Uint8Array(0)],
    ["img/e.jpg", new Uint8Array(randomBytes(200_000))], // several 64 KiB blocks
    ...Array.from({ length: 11 }, (_, i): [string, Uint8Array] => [`img/n${i}.jpg`, new Uint8Array(randomBytes(100 + i))]),
  ];
  for (const [key, body] of bodies) await layer.put(key, body, body.length);

  const first = storedNonces();
  expect(first.size).toBe(bodies.length);
  const nonces = [...first.values()];
  expect(new Set(nonces).size).toBe(nonces.length);
  expect(nonces).not.toContain("00".repeat(NONCE_SIZE));

  // Same plaintext under two keys: different ciphertext all the way through.
  const [pathA, pathB] = [...first.keys()].filter((p) => readFileSync(join(dir, p)).length === HEADER_SIZE + 5000 + 16);
  expect(pathA && pathB).toBeTruthy();
  expect(
    readFileSync(join(dir, pathA!))
      .subarray(HEADER_SIZE)
      .equals(readFileSync(join(dir, pathB!)).subarray(HEADER_SIZE)),
  ).toBe(false);

  // Overwriting a key writes a fresh nonce, unlike any used before.
  await layer.put("img/a.jpg", same, same.length);
  const after = storedNonces();
  const rewritten = [...after.entries()].find(([path, nonce]) => first.get(path) !== nonce);
  expect(rewritten).toBeDefined();
  expect(nonces).not.toContain(rewritten![1]);

  // And everything still decrypts to what was written.
  for (const [key, body] of bodies) expect(Buffer.from(await readAll((await layer.get(key)).stream)).equals(Buffer.from(body))).toBe(true);
});
