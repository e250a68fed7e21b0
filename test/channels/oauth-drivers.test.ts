/**
 * The OneDrive, Google Drive and Dropbox drivers against local fakes of each
 * provider (test/channels/fakes): the shared conformance suite, uploads big
 * enough for upload sessions, token refresh (expired locally or rejected by
 * the API) with the new token handed to the owner, and credential-free errors.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import type { createDriveDriver } from "../../src/channels/drivers/drive.ts";
import type { createOnedriveDriver } from "../../src/channels/drivers/onedrive.ts";
import { parseSize } from "../../src/channels/oauth/driver-kit.ts";
import { parseToken, serializeToken } from "../../src/channels/oauth/token.ts";
import { chunkedStream, driverConformance, listKeys, readAll } from "./conformance.ts";
import { errorOf } from "../helpers/rejection";
import { type OAuthProvider, startOAuthFakes } from "./fakes/oauth-providers.ts";

const { onedrive, drive, dropbox, providers: makers, stop } = startOAuthFakes();
afterAll(stop);

/**
 * A fetch whose large bodies (downloads, not API JSON; Dropbox downloads by POST) arrive in `pieces` pieces `gapMs`
 * apart, as over a slow link. Like a real body, it fails when the request's signal aborts.
 */
function trickling(pieces: number, gapMs: number): typeof fetch {
  const slowed = async (input: string | URL | Request, init?: RequestInit) => {
    const res = await fetch(input, init);
    const json = (res.headers.get("content-type") ?? "").includes("json");
    if (json || Number(res.headers.get("content-length") ?? 0) < 20_000) return res;
    const bytes = new Uint8Array(await res.arrayBuffer());
    const step = Math.ceil(bytes.byteLength / pieces);
    let offset = 0;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        init?.signal?.addEventListener("abort", () => controller.error(init.signal!.reason));
      },
      async pull(controller) {
        if (offset > 0) await Bun.sleep(gapMs);
        if (offset >= bytes.byteLength) return controller.close();
        controller.enqueue(bytes.slice(offset, offset + step));
        offset += step;
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return slowed as typeof fetch;
}

interface Provider extends OAuthProvider {
  /** Options that force multi-chunk upload sessions for a few hundred KiB. */
  smallChunks: Record<string, string>;
}

// OneDrive's simple uploads go up to 4 MiB; its session path is exercised by the 5 MiB test below.
const SMALL_CHUNKS: Record<string, Record<string, string>> = {
  onedrive: { chunk_size: "320k" },
  drive: { chunk_size: "256k", upload_cutoff: "256k" },
  dropbox: { chunk_size: "256k" },
};
const providers: Provider[] = makers.map((m) => ({ ...m, smallChunks: SMALL_CHUNKS[m.name]! }));

let counter = 0;
for (const p of providers) {
  driverConformance(`${p.name} (local fake, nested path)`, async () => ({ driver: p.make({ path: `conf-${++counter}/nested` }), cleanup: async () => {} }));
}
// The drive root itself, with chunked uploads for anything above 256 KiB.
driverConformance("dropbox (local fake, drive root, small chunks)", async () => ({
  driver: providers[2]!.make({ ...providers[2]!.smallChunks }),
  cleanup: async () => {},
}));

for (const p of providers) {
  describe(`${p.name}: uploads, tokens and errors against the fake`, () => {
    test("a file larger than one chunk goes up in pieces and reads back intact", async () => {
      const size = p.name === "onedrive" ? 5 * 1024 * 1024 + 777 : 700 * 1024 + 5;
      const bytes = new Uint8Array(randomBytes(size));
      const driver = p.make({ path: `chunks-${++counter}`, ...p.smallChunks });
      await driver.put("big/file.bin", chunkedStream(bytes, 100_000), size);
      expect((await driver.head("big/file.bin"))?.size).toBe(size);
      const back = await readAll((await driver.get("big/file.bin")).stream);
      expect(Buffer.compare(Buffer.from(back), Buffer.from(bytes))).toBe(0);
      const middle = await driver.get("big/file.bin", { start: 300_000, end: 300_009 });
      expect(Buffer.from(await readAll(middle.stream))).toEqual(Buffer.from(bytes.subarray(300_000, 300_010)));
    });

    test("an access token past its expiry is refreshed before use and handed to onTokenRefreshed", async () => {
      const stale = p.oauth.tokenJson({ expiredLocally: true });
      const refreshed: string[] = [];
      const driver = p.make({ token: stale, path: `refresh-${++counter}` }, { onTokenRefreshed: (t) => refreshed.push(t) });
      await driver.probe(true);
      expect(refreshed).toHaveLength(1);
      const token = JSON.parse(refreshed[0]!);
      expect(Object.keys(token)).toEqual(["access_token", "token_type", "refresh_token", "expiry"]);
      expect(token.access_token).not.toBe(JSON.parse(stale).access_token);
      expect(Date.parse(token.expiry)).toBeGreaterThan(Date.now() + 30 * 60_000);
      // Providers that do not rotate keep the old refresh token; OneDrive's fake rotates it.
      expect(p.oauth.isValidRefreshToken(token.refresh_token)).toBe(true);
    });

    test("a token the API rejects (401) is refreshed once and the request retried", async () => {
      const refreshed: string[] = [];
      const driver = p.make({ path: `reject-${++counter}` }, { onTokenRefreshed: (t) => refreshed.push(t) });
      await driver.put("a.txt", new Uint8Array([1, 2, 3]), 3);
      p.oauth.expireAccessTokens();
      // Concurrent requests share one refresh.
      const results = await Promise.all([driver.head("a.txt"), driver.head("a.txt"), driver.put("b.txt", new Uint8Array([4]), 1)]);
      expect(results[0]?.size).toBe(3);
      expect(refreshed).toHaveLength(1);
      expect(await listKeys(driver, "")).toEqual(["a.txt", "b.txt"]);
    });

    test("a revoked grant fails the probe with a Chinese message that carries no credential", async () => {
      const token = p.oauth.tokenJson({ expiredLocally: true });
      p.oauth.revokeRefreshTokens();
      const err = await errorOf(p.make({ token }).probe(false));
      expect(err.message).toMatch(/[\u4e00-\u9fff]/);
      expect(err.message).toContain("invalid_grant");
      const parsed = JSON.parse(token);
      for (const secret of [parsed.access_token, parsed.refresh_token, p.oauth.clientSecret]) expect(err.message).not.toContain(secret);
    });

    test("a wrong access token without a way to refresh fails the probe without echoing it", async () => {
      const bogus = JSON.stringify({ access_token: "bogus-access-token-123", token_type: "Bearer", expiry: "0001-01-01T00:00:00Z" });
      const err = await errorOf(p.make({ token: bogus }).probe(false));
      expect(err.message).toContain("refresh_token");
      expect(err.message).toMatch(/[\u4e00-\u9fff]/);
      expect(err.message).not.toContain("bogus-access-token-123");
    });

    test("a download may take longer than the timeout while bytes keep coming; a silent one fails", async () => {
      const TIMEOUT_MS = 400;
      const bytes = new Uint8Array(randomBytes(60_000));
      await p.make({ path: `slow-${++counter}` }).put("slow.bin", bytes, bytes.byteLength);
      // Eight pieces, 0.25 × the timeout apart (0.8 s in all): never silent for a whole timeout.
      const slow = p.make({ path: `slow-${counter}` }, { timeoutMs: TIMEOUT_MS, fetch: trickling(8, TIMEOUT_MS * 0.25) });
      const back = await readAll((await slow.get("slow.bin")).stream);
      expect(Buffer.compare(Buffer.from(back), Buffer.from(bytes))).toBe(0);
      // A gap of twice the timeout between two pieces: the read fails after one timeout of silence.
      const stalling = p.make({ path: `slow-${counter}` }, { timeoutMs: TIMEOUT_MS, fetch: trickling(2, TIMEOUT_MS * 2) });
      const err = await errorOf(readAll((await stalling.get("slow.bin")).stream));
      expect(err.message).toBe(`读取响应超时：${TIMEOUT_MS / 1000} 秒未收到数据`);
    });

    test("config validation names the problem, never the value", () => {
      expect(() => p.make({ token: "" })).toThrow("token");
      expect(() => p.make({ token: "not json secret-value" })).toThrow("JSON");
      try {
        p.make({ token: "not json secret-value" });
      } catch (e) {
        expect((e as Error).message).not.toContain("secret-value");
      }
      expect(() => p.make({ path: "../up" })).toThrow("path");
      expect(() => p.make({ token_url: "ftp://x/" })).toThrow("token_url");
    });
  });
}

describe("what lands at the providers", () => {
  test("onedrive: rclone's name encoding for forbidden characters, listing decodes it back", async () => {
    const driver = providers[0]!.make({ path: "names" });
    await driver.put('odd/a:b?c*"<>|.txt', new Uint8Array([7]), 1);
    await driver.put("odd/ lead and trail. ", new Uint8Array([8]), 1);
    await driver.put("odd/already：fullwidth", new Uint8Array([9]), 1);
    expect(onedrive.files.has("names/odd/a：b？c＊＂＜＞｜.txt")).toBe(true);
    expect(onedrive.files.has("names/odd/␠lead and trail.␠")).toBe(true);
    expect(onedrive.files.has("names/odd/already‛：fullwidth")).toBe(true);
    expect(await listKeys(driver, "odd/")).toEqual(["odd/ lead and trail. ", 'odd/a:b?c*"<>|.txt', "odd/already：fullwidth"]);
  });

  test("onedrive: downloads follow the 302 without sending the token to the download URL; drive_id can be looked up", async () => {
    const driver = providers[0]!.make({ drive_id: "", path: "dl" });
    await driver.put("x.bin", new Uint8Array([1, 2]), 2);
    onedrive.requests.length = 0;
    expect(Array.from(await readAll((await driver.get("x.bin")).stream))).toEqual([1, 2]);
    const dl = onedrive.requests.filter((r) => r.path.startsWith("/dl/"));
    expect(dl).toHaveLength(1);
    expect(dl[0]!.auth).toBe(false);
    expect(await (driver as ReturnType<typeof createOnedriveDriver>).defaultDrive()).toEqual({ id: onedrive.driveId, driveType: "personal" });
  });

  test("drive: overwrite keeps one file, folders are not duplicated, delete trashes by default", async () => {
    const driver = providers[1]!.make({ path: "ow" });
    await Promise.all([driver.put("d/one", new Uint8Array([1]), 1), driver.put("d/two", new Uint8Array([2]), 1)]);
    await driver.put("d/one", new Uint8Array([3, 3]), 2);
    const live = [...drive.files.values()].filter((f) => !f.trashed && drive.pathOf(f).startsWith("ow/"));
    expect(live.map((f) => drive.pathOf(f)).sort()).toEqual(["ow/d", "ow/d/one", "ow/d/two"]);
    await driver.delete("d/one");
    const trashed = [...drive.files.values()].find((f) => f.trashed && f.name === "one");
    expect(trashed?.bytes?.byteLength).toBe(2);
    expect(await (driver as ReturnType<typeof createDriveDriver>).rootFolderId()).toBe(drive.rootId);
  });

  test("dropbox: Dropbox-API-Arg is ASCII-only JSON even for non-ASCII keys", async () => {
    const driver = providers[2]!.make({ path: "ünï" });
    dropbox.requests.length = 0;
    await driver.put("名前/ファイル.jpg", new Uint8Array([5]), 1);
    const upload = dropbox.requests.find((r) => r.path === "/2/files/upload")!;
    expect(upload.arg).toMatch(/^[\x20-\x7e]+$/);
    expect(JSON.parse(upload.arg!).path).toBe("/ünï/名前/ファイル.jpg");
    expect(await listKeys(driver, "")).toEqual(["名前/ファイル.jpg"]);
  });
});

describe("rclone's formats", () => {
  test("token JSON: rclone's fields and key order, Go's zero time and offsets understood", () => {
    const fromRclone = '{"access_token":"a","token_type":"bearer","refresh_token":"r","expiry":"2026-11-23T16:53:10.869591+08:00"}';
    const token = parseToken(fromRclone, "X");
    expect(token.expiry?.toISOString()).toBe("2026-11-23T08:53:10.869Z");
    expect(serializeToken(token)).toBe('{"access_token":"a","token_type":"bearer","refresh_token":"r","expiry":"2026-11-23T08:53:10.869Z"}');
    const forever = parseToken('{"access_token":"a","expiry":"0001-01-01T00:00:00Z"}', "X");
    expect(forever.expiry).toBeNull();
    expect(JSON.parse(serializeToken(forever))).toEqual({ access_token: "a", token_type: "Bearer", expiry: "0001-01-01T00:00:00Z" });
  });

  test("sizes: rclone's suffixes, base 1024, bare numbers in KiB", () => {
    expect(parseSize("10M", "chunk_size", 0)).toBe(10 * 1024 * 1024);
    expect(parseSize("10Mi", "chunk_size", 0)).toBe(10 * 1024 * 1024);
    expect(parseSize("320k", "chunk_size", 0)).toBe(327_680);
    expect(parseSize("320", "chunk_size", 0)).toBe(327_680);
    expect(parseSize("100b", "chunk_size", 0)).toBe(100);
    expect(parseSize("", "chunk_size", 42)).toBe(42);
    expect(() => parseSize("lots", "chunk_size", 0)).toThrow("chunk_size");
    expect(() => providers[0]!.make({ chunk_size: "100k" })).toThrow("320k");
  });
});
