/**
 * Lsky Pro V2 API points of audit LOW-13: `DELETE /api/v1/tokens` (Lsky's "clear tokens",
 * TokenController::clear), limited to the calling token and the tokens `POST /api/v1/tokens`
 * issued; and `md5`/`sha1` on the image list's items, read from what the upload stored, never
 * from the bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CopyObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Session } from "../helpers/client";
import { form, makeJpeg, makePng } from "../helpers/images";
import { type ClientFixture, specJson, startClientFixture } from "./fixture";

const md5 = (bytes: Uint8Array) => new Bun.CryptoHasher("md5").update(bytes).digest("hex");
const sha1 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha1").update(bytes).digest("hex");

describe("Lsky Pro V2 API: clear tokens, list digests", () => {
  let f: ClientFixture;
  let seed = 1300;
  beforeAll(async () => {
    f = await startClientFixture();
  });
  afterAll(async () => {
    await f.dispose();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const profileStatus = async (token: string) => (await fetch(f.server.url("/api/v1/profile"), { headers: bearer(token) })).status;
  const lskyToken = async (name: string, password: string): Promise<string> => {
    const res = await fetch(f.server.url("/api/v1/tokens"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: name, password }),
    });
    return (await specJson(res, "POST", "/api/v1/tokens")).data.token;
  };
  const clear = (token?: string) => fetch(f.server.url("/api/v1/tokens"), { method: "DELETE", headers: token ? bearer(token) : {} });

  /** A user with a console session, two console tokens (one with its S3 credential) and two Lsky tokens. */
  async function userWithTokens() {
    const name = `clear${seed++}`;
    const password = "clear-password-1";
    await f.admin.json("POST", "/api/admin/users", { name, password, role: "user" }, 201);
    const session = new Session(f.server);
    expect((await session.login(name, password)).status).toBe(200);
    const consoleToken = await session.json("POST", "/api/admin/tokens", { name: "sharex" }, 201);
    const otherConsoleToken = await session.json("POST", "/api/admin/tokens", { name: "rclone" }, 201);
    const cred = await session.json("POST", `/api/admin/tokens/${otherConsoleToken.id}/s3-credential`);
    return { name, password, session, consoleToken, otherConsoleToken, cred, lsky: [await lskyToken(name, password), await lskyToken(name, password)] };
  }

  const s3Client = (cred: { endpoint: string; region: string; access_key_id: string; secret_access_key: string }) =>
    new S3Client({
      endpoint: cred.endpoint,
      region: cred.region,
      forcePathStyle: true,
      credentials: { accessKeyId: cred.access_key_id, secretAccessKey: cred.secret_access_key },
      maxAttempts: 1,
    });

  const s3Lists = async (cred: { endpoint: string; region: string; access_key_id: string; secret_access_key: string }) => {
    return s3Client(cred)
      .send(new ListObjectsV2Command({ Bucket: "kura" }))
      .then(
        () => true,
        () => false,
      );
  };

  test("DELETE /api/v1/tokens answers Lsky's success and revokes the calling token and the user's Lsky-issued tokens only", async () => {
    const u = await userWithTokens();
    const stranger = await userWithTokens();
    const res = await clear(u.lsky[0]!);
    expect(res.status).toBe(200);
    expect(await specJson(res, "DELETE", "/api/v1/tokens")).toEqual({ status: true, message: "success", data: {} });
    // Both Lsky tokens of the user are gone (the second was not the caller) ...
    expect(await profileStatus(u.lsky[0]!)).toBe(401);
    expect(await profileStatus(u.lsky[1]!)).toBe(401);
    // ... console tokens, their S3 credential and the console session are not, nor another user's Lsky token.
    expect(await profileStatus(u.consoleToken.token)).toBe(200);
    expect(await profileStatus(u.otherConsoleToken.token)).toBe(200);
    expect(await s3Lists(u.cred)).toBe(true);
    expect((await u.session.request("GET", "/api/admin/me")).status).toBe(200);
    expect(await profileStatus(stranger.lsky[0]!)).toBe(200);
    // Revoked, not deleted: the user's token list shows them, and the audit names the surface.
    const listed = await u.session.json("GET", "/api/admin/tokens");
    const revoked = listed.items.filter((t: { revoked_at: string | null }) => t.revoked_at).map((t: { name: string }) => t.name);
    expect(revoked.sort()).toEqual(
      listed.items
        .filter((t: { name: string }) => t.name.startsWith("lsky-"))
        .map((t: { name: string }) => t.name)
        .sort(),
    );
    expect(revoked.length).toBe(2);
    const audit = await f.admin.json("GET", "/api/admin/audit?action=token.revoke");
    const mine = audit.items.filter((e: { actor_name: string }) => e.actor_name === u.name);
    expect(mine.map((e: { detail: string }) => JSON.parse(e.detail).via)).toEqual(["lsky", "lsky"]);
  });

  test("called with a console-made token: that token and the Lsky-issued ones are revoked, the user's other console token stays", async () => {
    const u = await userWithTokens();
    const res = await clear(u.consoleToken.token);
    expect(await specJson(res, "DELETE", "/api/v1/tokens")).toEqual({ status: true, message: "success", data: {} });
    expect(await profileStatus(u.consoleToken.token)).toBe(401);
    for (const token of u.lsky) expect(await profileStatus(token)).toBe(401);
    expect(await profileStatus(u.otherConsoleToken.token)).toBe(200);
    expect(await s3Lists(u.cred)).toBe(true);
    // A new Lsky login works as before.
    expect(await profileStatus(await lskyToken(u.name, u.password))).toBe(200);
  });

  test("a user holds at most 100 live tokens from POST /api/v1/tokens; clearing them makes room again", async () => {
    const u = await userWithTokens(); // two already
    const issued = [...u.lsky];
    for (let i = 0; i < 98; i++) issued.push(await lskyToken(u.name, u.password));
    const refused = await fetch(f.server.url("/api/v1/tokens"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: u.name, password: u.password }),
    });
    const body = await specJson(refused, "POST", "/api/v1/tokens");
    expect(body).toMatchObject({ status: false, message: expect.stringContaining("已有 100 个") });
    // The tokens issued so far all still work; a console token is not counted.
    expect(await profileStatus(issued.at(-1)!)).toBe(200);
    expect((await clear(issued[0]!)).status).toBe(200);
    expect(await profileStatus(await lskyToken(u.name, u.password))).toBe(200);
  });

  test("without a valid token it is Lsky's 401 and revokes nothing", async () => {
    const u = await userWithTokens();
    for (const res of [await clear(), await clear(`kura_aaaaaaaaaaaa_${"A".repeat(43)}`)]) {
      expect(res.status).toBe(401);
      expect(await specJson(res, "DELETE", "/api/v1/tokens")).toMatchObject({ status: false, data: {} });
    }
    for (const token of u.lsky) expect(await profileStatus(token)).toBe(200);
  });

  /** A user's Lsky list, by origin_name: key, md5 and sha1. */
  async function lskyList(token: string) {
    const res = await fetch(f.server.url("/api/v1/images"), { headers: bearer(token) });
    expect(res.status).toBe(200);
    const items = (await specJson(res, "GET", "/api/v1/images")).data.data as { key: string; origin_name: string; md5: string | null; sha1: string | null }[];
    return Object.fromEntries(items.map((i) => [i.origin_name, { key: i.key, md5: i.md5, sha1: i.sha1 }]));
  }

  test("list items show only the digests the image's own upload computed, never those another account's upload stored with the same bytes (audit LOW-2)", async () => {
    const alice = await userWithTokens();
    const bob = await userWithTokens();
    const lskyUpload = async (token: string, bytes: Uint8Array, name: string) => {
      const fd = new FormData();
      fd.append("file", new Blob([new Uint8Array(bytes)]), name);
      const res = await fetch(f.server.url("/api/v1/upload"), { method: "POST", headers: bearer(token), body: fd });
      return (await specJson(res, "POST", "/api/v1/upload")).data as { key: string; md5: string; sha1: string };
    };
    const consoleUpload = (session: Session, bytes: Uint8Array, name: string) => session.json("POST", "/api/admin/upload", form(bytes, name));
    const cheveretoUpload = async (token: string, bytes: Uint8Array, name: string) => {
      const fd = new FormData();
      fd.append("key", token);
      fd.append("source", new Blob([new Uint8Array(bytes)]), name);
      return (await specJson(await fetch(f.server.url("/api/1/upload"), { method: "POST", body: fd }), "POST", "/api/1/upload")).image;
    };

    // The audit's steps: alice uploads through the Lsky API, bob the same bytes and then fresh ones in the console.
    const guessed = await makeJpeg(26, 26, seed++);
    const alicesGuessed = await lskyUpload(alice.lsky[0]!, guessed, "alice-guess.jpg");
    const bobGuess = await consoleUpload(bob.session, guessed, "bob-guess.jpg");
    await consoleUpload(bob.session, await makeJpeg(27, 27, seed++), "bob-fresh.jpg");
    // The other order: bob's console upload first, then alice's Chevereto upload of the same bytes stores the digests.
    const earlier = await makeJpeg(28, 28, seed++);
    const bobEarlier = await consoleUpload(bob.session, earlier, "bob-earlier.jpg");
    const alicesEarlier = await cheveretoUpload(alice.consoleToken.token, earlier, "alice-earlier.jpg");
    // Bob's own Lsky upload of bytes alice stored before computes them itself.
    const both = await makePng(29, 19, seed++);
    await lskyUpload(alice.lsky[0]!, both, "alice-both.png");
    const bobsBoth = await lskyUpload(bob.lsky[0]!, both, "bob-lsky.png");
    // An S3 upload hashes the MD5 only (its ETag); a copy of bob's own object knows what the object knows.
    const object = await makePng(31, 17, seed++);
    await lskyUpload(alice.lsky[0]!, object, "alice-object.png");
    const s3 = s3Client(bob.cred);
    await s3.send(new PutObjectCommand({ Bucket: "kura", Key: "digests/bob-object.png", Body: object, ContentType: "image/png" }));
    await s3.send(new CopyObjectCommand({ Bucket: "kura", Key: "digests/bob-copy.png", CopySource: "kura/digests/bob-object.png" }));

    const bobs = await lskyList(bob.lsky[1]!);
    // Each pair is one blob: the digests alice's uploads stored are there to be read.
    for (const name of ["bob-guess.jpg", "bob-earlier.jpg", "bob-lsky.png", "bob-object.png"]) {
      expect((await f.admin.json("GET", `/api/admin/images/${bobs[name]!.key}`)).ref_count).toBeGreaterThanOrEqual(2);
    }
    expect(bobs).toEqual({
      "bob-guess.jpg": { key: bobGuess.id, md5: null, sha1: null },
      "bob-fresh.jpg": { key: expect.any(String), md5: null, sha1: null },
      "bob-earlier.jpg": { key: bobEarlier.id, md5: null, sha1: null },
      "bob-lsky.png": { key: bobsBoth.key, md5: md5(both), sha1: sha1(both) },
      "bob-object.png": { key: expect.any(String), md5: md5(object), sha1: null },
      "bob-copy.png": { key: expect.any(String), md5: md5(object), sha1: null },
    });
    expect(bobsBoth).toMatchObject({ md5: md5(both), sha1: sha1(both) });
    // Alice's own uploads still show theirs.
    expect(await lskyList(alice.lsky[1]!)).toEqual({
      "alice-guess.jpg": { key: alicesGuessed.key, md5: alicesGuessed.md5, sha1: alicesGuessed.sha1 },
      "alice-earlier.jpg": { key: alicesEarlier.id_encoded, md5: alicesEarlier.md5, sha1: expect.stringMatching(/^[0-9a-f]{40}$/) },
      "alice-both.png": { key: expect.any(String), md5: md5(both), sha1: sha1(both) },
      "alice-object.png": { key: expect.any(String), md5: md5(object), sha1: sha1(object) },
    });
    expect(alicesGuessed).toMatchObject({ md5: expect.stringMatching(/^[0-9a-f]{32}$/), sha1: expect.stringMatching(/^[0-9a-f]{40}$/) });
  });

  /** Every stored blob file of the default local channel. */
  function blobFiles(dir = join(f.server.dataDir, "storage")): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? blobFiles(join(dir, e.name)) : [join(dir, e.name)]));
  }

  test("list items carry the md5 and sha1 the upload stored, null where no upload computed them, without reading bytes", async () => {
    const owner = await userWithTokens();
    const token = owner.consoleToken.token;
    const viaLsky = await makePng(30, 20, seed++);
    const fd = new FormData();
    fd.append("file", new Blob([new Uint8Array(viaLsky)]), "digest-lsky.png");
    const lsky = await specJson(await fetch(f.server.url("/api/v1/upload"), { method: "POST", headers: bearer(token), body: fd }), "POST", "/api/v1/upload");
    expect(lsky.data).toMatchObject({ md5: md5(viaLsky), sha1: sha1(viaLsky) });
    const chevereto = new FormData();
    chevereto.append("key", token);
    chevereto.append("source", new Blob([new Uint8Array(await makeJpeg(20, 20, seed++))]), "digest-chevereto.jpg");
    // EXIF stripped: the digests are those of the stored bytes, as the answer gives its md5.
    const viaChevereto = (await specJson(await fetch(f.server.url("/api/1/upload"), { method: "POST", body: chevereto }), "POST", "/api/1/upload")).image;
    const keyed = await makeJpeg(22, 22, seed++);
    const upload = (bytes: Uint8Array, name: string, fields: Record<string, string> = {}) =>
      fetch(f.server.url("/api/upload"), { method: "POST", headers: bearer(token), body: form(bytes, name, { exif_policy: "passthrough", ...fields }) });
    expect((await upload(keyed, "digest-keyed.jpg", { object_key: "digest/keyed.jpg" })).status).toBe(200);
    const plain = await makeJpeg(24, 24, seed++);
    expect((await upload(plain, "digest-plain.jpg")).status).toBe(200);

    // The bytes are gone: a listing that hashed them would fail or leave the digests out.
    for (const file of blobFiles()) rmSync(file);
    const res = await fetch(f.server.url("/api/v1/images?keyword=digest-"), { headers: bearer(token) });
    expect(res.status).toBe(200);
    const items = (await specJson(res, "GET", "/api/v1/images")).data.data as { origin_name: string; md5: string | null; sha1: string | null }[];
    const byName = Object.fromEntries(items.map((i) => [i.origin_name, { md5: i.md5, sha1: i.sha1 }]));
    expect(byName).toEqual({
      "digest-lsky.png": { md5: md5(viaLsky), sha1: sha1(viaLsky) },
      "digest-chevereto.jpg": { md5: viaChevereto.md5, sha1: expect.stringMatching(/^[0-9a-f]{40}$/) },
      "digest-keyed.jpg": { md5: md5(keyed), sha1: sha1(keyed) },
      // A plain form upload computes no digest: unknown, not made up.
      "digest-plain.jpg": { md5: null, sha1: null },
    });
  });
});
