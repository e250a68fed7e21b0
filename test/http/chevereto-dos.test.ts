/**
 * Chevereto's key inside the form (POST /api/1/upload) against unauthenticated clients:
 *
 * - forms whose key has not arrived take slots of a pool of their own (4), never the
 *   `max_concurrent_uploads` slots: 16 silent connections (the audit's F4) used to hold every
 *   slot, so every upload of every user was 429 until they went away;
 * - the key is checked the moment its field has arrived: a wrong one is refused (Chevereto's 400,
 *   code 100) before the rest of the body is sent (it used to be read whole first, up to ~56 MB),
 *   a right one moves the upload out of that pool;
 * - a urlencoded form streams: a long base64 `source` is decoded to disk as it arrives and gives
 *   the same image as before, whatever the order of its fields.
 *
 * The idle deadline stays at its default (60 s) here, so held connections stay held for the test.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { settled } from "../helpers/settle";
import { chunk, MULTIPART, partHead, RawRequest, textPart } from "./raw-upload.helpers";

const { server, admin } = useAdmin();
let token = "";
let seed = 900;

const tokenUpload = async (path = "/api/upload") =>
  fetch(server.url(path), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(await makeJpeg(16, 16, seed++)) });

/** A Chevereto form: ShareX's `key` and `format`, then the file as `source`; without `withKey`, the key goes in X-API-Key. */
async function cheveretoUpload(withKey = true) {
  const fd = new FormData();
  if (withKey) fd.append("key", token);
  fd.append("format", "json");
  fd.append("source", new Blob([new Uint8Array(await makeJpeg(16, 16, seed++))]), "shot.jpg");
  return fetch(server.url("/api/1/upload"), { method: "POST", body: fd, headers: withKey ? {} : { "x-api-key": token } });
}
const sharexUpload = () => cheveretoUpload(true);

/** A chunked Chevereto request that sends `first` and then nothing (as the audit's slowchev.ts). */
const silent = (first: string | Uint8Array, type = MULTIPART) =>
  RawRequest.open(server, ["POST /api/1/upload HTTP/1.1", "Host: 127.0.0.1", `Content-Type: ${type}`, "Transfer-Encoding: chunked"].join("\r\n"), chunk(first));

/** The uploads being staged in the data directory's tmp/ (one `upload-…` file each). */
const stagedUploads = () =>
  readdirSync(join(server.dataDir, "tmp"))
    .map(String)
    .filter((f) => f.startsWith("upload-"));

const fileStart = (bytes = 1024) => Buffer.concat([Buffer.from(partHead("source", "x.png")), Buffer.alloc(bytes, 0x41)]);

test("setup: an upload token", async () => {
  token = (await admin.json<{ token: string }>("POST", "/api/admin/tokens", { name: "chevereto-dos" }, 201)).token;
  expect(token).toStartWith("kura_");
});

describe("unauthenticated forms", () => {
  test("16 silent forms without a key hold 4 slots of their own; every other upload still goes through", async () => {
    const held = await Promise.all(Array.from({ length: 16 }, () => silent(fileStart())));
    try {
      // Beyond the pool they are refused at once, in Chevereto's envelope, with the way out.
      const refused = await settled(
        async () => (await Promise.all(held.map((r) => r.within(0)))).filter(Boolean),
        (answers) => answers.length >= 12,
        5000,
      );
      expect(refused.length).toBe(12);
      for (const a of refused) {
        expect(a!.status).toBe(429);
        const body = JSON.parse(a!.body);
        expect(body.status_code).toBe(429);
        expect(body.error.message).toContain("X-API-Key");
      }
      // The max_concurrent_uploads slots are all free for uploads whose sender is known.
      for (const path of ["/api/upload", "/api/v1/upload"]) expect((await tokenUpload(path)).status).toBe(200);
      expect((await cheveretoUpload(false)).status).toBe(200);
      const fromConsole = await fetch(server.url("/api/admin/upload"), {
        method: "POST",
        headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf },
        body: form(await makeJpeg(16, 16, seed++)),
      });
      expect(fromConsole.status).toBe(200);
      // Only forms with the key inside wait for that pool (documented).
      expect((await sharexUpload()).status).toBe(429);
    } finally {
      for (const r of held) r.destroy();
    }
    // Hung up: their slots come back.
    const after = await settled(sharexUpload, (r) => r.status === 200, 5000);
    expect(after.status).toBe(200);
  });

  test("the form's key is checked when it arrives: a wrong one is refused before the body is sent, a right one leaves the pool", async () => {
    // A wrong key first, then most of a body that never comes: answered at once, multipart and urlencoded.
    const wrongMultipart = await silent(Buffer.concat([Buffer.from(textPart("key", "kura_wrong")), fileStart(64 * 1024)]));
    const wrongForm = await RawRequest.open(
      server,
      ["POST /api/1/upload HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/x-www-form-urlencoded", `Content-Length: ${50 * 1024 * 1024}`].join("\r\n"),
      `key=kura_wrong&format=txt&source=${"QUJD".repeat(4096)}`,
    );
    try {
      const a = await wrongMultipart.within(5000);
      expect(a?.status).toBe(400);
      expect(JSON.parse(a!.body).error.code).toBe(100);
      const b = await wrongForm.within(5000);
      expect(b?.status).toBe(400);
    } finally {
      wrongMultipart.destroy();
      wrongForm.destroy();
    }
    // Five forms whose right key came first, then silence: none of them is left in the pool of 4.
    const before = new Set(stagedUploads());
    const authenticated = await Promise.all(Array.from({ length: 5 }, () => silent(Buffer.concat([Buffer.from(textPart("key", token)), fileStart()]))));
    try {
      // Each has left the pool once its file is being staged (its key read and its slot taken): an
      // event to wait for, where a fixed pause could end before a loaded server got that far.
      const staged = await settled(
        async () => stagedUploads().filter((f) => !before.has(f)).length,
        (n) => n >= 5,
        10_000,
      );
      expect(staged).toBe(5);
      for (const r of authenticated) expect(await r.within(0)).toBeUndefined();
      expect((await sharexUpload()).status).toBe(200);
    } finally {
      for (const r of authenticated) r.destroy();
    }
  });
});

describe("urlencoded forms stream", () => {
  let png: Buffer;
  const md5 = (b: Uint8Array) => new Bun.CryptoHasher("md5").update(b).digest("hex");
  const post = (body: string, query = "") =>
    fetch(server.url(`/api/1/upload${query}`), { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body });
  const tmpFiles = () => readdirSync(join(server.dataDir, "tmp"), { recursive: true }).map(String);

  test("setup: a noisy PNG of about 200 KB", async () => {
    let x = 2463534242;
    // xorshift32: noise that PNG cannot compress, the same on every run.
    const pixels = new Uint8Array(260 * 260 * 3).map(() => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return x & 0xff;
    });
    png = await sharp(pixels, { raw: { width: 260, height: 260, channels: 3 } })
      .png()
      .toBuffer();
    expect(png.length).toBeGreaterThan(150_000);
  });

  test("a long base64 source gives the same image with the key first or last, as a data: URL, with line breaks", async () => {
    const b64 = png.toString("base64");
    const wrapped = (b64.match(/.{1,76}/g) ?? []).join("\r\n");
    const bodies = [
      `key=${token}&source=${encodeURIComponent(b64)}`,
      `source=${encodeURIComponent(b64)}&format=json&key=${token}`,
      `key=${token}&source=${encodeURIComponent(`data:image/png;base64,${b64}`)}`,
      // `+` and `/` unescaped as `%2B`/`%2F` only where curl's --data-urlencode would; line breaks are whitespace.
      `source=${encodeURIComponent(wrapped)}&key=${token}`,
    ];
    for (const [i, body] of bodies.entries()) {
      const res = await post(body);
      const answer = await res.json();
      expect(res.status, `body ${i}: ${JSON.stringify(answer)}`).toBe(200);
      expect(answer.image.md5).toBe(md5(png));
      expect(answer.image.size).toBe(png.length);
      const served = await fetch(answer.image.url);
      expect(md5(new Uint8Array(await served.arrayBuffer()))).toBe(md5(png));
    }
    // A later source replaces an earlier one; the form's source replaces the query's.
    const replaced = await post(`source=${"QUJD".repeat(5000)}&source=${encodeURIComponent(b64)}&key=${token}`, "?source=http%3A%2F%2F10.0.0.1%2Fx.png");
    expect(replaced.status).toBe(200);
    expect((await replaced.json()).image.md5).toBe(md5(png));
    expect(tmpFiles()).toEqual([]);
  });

  test("a long source that is not base64 is 400, one over the cap 413, a key over 1 KiB 400: nothing stays", async () => {
    const bad = await post(`key=${token}&source=${"QUJD".repeat(5000)}*${"QUJD".repeat(5000)}`);
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toContain("base64");
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    try {
      const over = await post(`source=${"QUJD".repeat(420_000)}&key=${token}`);
      expect(over.status).toBe(413);
    } finally {
      await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    }
    const longKey = await post(`key=${"k".repeat(1025)}&source=QUJD`);
    expect(longKey.status).toBe(400);
    expect((await longKey.json()).error.message).toContain("1 KiB");
    expect(
      await settled(
        async () => tmpFiles(),
        (f) => f.length === 0,
      ),
    ).toEqual([]);
  });
});
