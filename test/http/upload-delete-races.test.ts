/**
 * Work racing the deletes that remove what it counts on (race audit H1, H2, L2–L4). Deterministic:
 * the upload is paused just before its commit (test-only pause point `upload.commit`), or a
 * replication before its put (`replicate.put`), or a render before it is cached (`variant.store`),
 * while the other side runs to its end, then released.
 *
 * - H1: a re-upload of bytes whose blob is stored writes nothing and becomes a reference to that
 *   blob. If the blob's physical delete (`delete_grace_minutes` 0) ran in between, the reference
 *   pointed at a new blob row under the old key with no copy anywhere: 200, then 503 for good.
 * - H2: a purge of the channel an upload has just written its only copy to passed its sole-copy
 *   check (no blob yet) and later drained that copy.
 * - L2: the uploader or its token deleted meanwhile: a 500 on the image row's foreign key.
 * - L3, L4: a copy or a variant finished after the blob's physical delete: left behind, and a
 *   foreign-key error (a failed job; a 500 for the request).
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { PausePoints } from "../helpers/pause-points";
import { listFiles } from "../helpers/files";
import { form, makeJpeg, sha256 } from "../helpers/images";

const pauses = new PausePoints();
const { server, admin } = useAdmin({ env: pauses.env("upload.commit", "replicate.put", "variant.store") });

function readDb<T>(sql: string, ...params: (string | number)[]): T[] {
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query(sql).all(...params) as T[];
  } finally {
    db.close();
  }
}

async function until(what: string, done: () => boolean | Promise<boolean>, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(25);
  }
}

const upload = (bytes: Buffer, name: string) => admin.json<{ id: string }>("POST", "/api/admin/upload", form(bytes, name, { exif_policy: "passthrough" }));

/** An upload paused just before its commit. */
const pausedDuring = <T>(filter: string, run: () => Promise<T>, meanwhile: () => Promise<void>) => pauses.during("upload.commit", filter, run, meanwhile);

async function served(id: string): Promise<{ status: number; sha: string }> {
  const res = await fetch(server.url(`/i/${id}`));
  return { status: res.status, sha: sha256(Buffer.from(await res.arrayBuffer())) };
}

test("H1: a re-upload whose blob is physically deleted before it commits stores its bytes again and serves them", async () => {
  await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
  const bytes = await makeJpeg(150, 100, 5151);
  const digest = sha256(bytes);
  const first = await upload(bytes, "first.jpg");

  const again = await pausedDuring(
    "wrote=0",
    () => upload(bytes, "again.jpg"),
    async () => {
      // The only other reference goes; with no grace its blob row and object are removed at once.
      expect((await admin.request("DELETE", `/api/admin/images/${first.id}`)).status).toBe(204);
      await until("the blob's physical delete", () => readDb("SELECT id FROM blobs WHERE sha256 = ?", digest).length === 0);
    },
  );

  expect(await served(again.id)).toEqual({ status: 200, sha: digest });
  const blobs = readDb<{ id: number; storage_key: string }>("SELECT id, storage_key FROM blobs WHERE sha256 = ?", digest);
  expect(blobs.length).toBe(1);
  expect(readDb("SELECT state FROM blob_channels WHERE blob_id = ?", blobs[0]!.id)).toEqual([{ state: "done" }]);
  expect(existsSync(join(server.dataDir, "storage", blobs[0]!.storage_key))).toBe(true);
});

test("H1: a re-upload that rewrites a blob's lost bytes under its key, while that blob is physically deleted, moves to a fresh key", async () => {
  await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
  const bytes = await makeJpeg(150, 100, 5252);
  const digest = sha256(bytes);
  const first = await upload(bytes, "first.jpg");
  const [lost] = readDb<{ id: number; storage_key: string }>("SELECT id, storage_key FROM blobs WHERE sha256 = ?", digest);
  const lostFile = join(server.dataDir, "storage", lost!.storage_key);
  // The blob's only object goes missing; the read that finds out marks the replica failed.
  rmSync(lostFile);
  expect((await served(first.id)).status).not.toBe(200);
  await until(
    "the replica marked failed",
    () => readDb<{ state: string }>("SELECT state FROM blob_channels WHERE blob_id = ?", lost!.id)[0]?.state === "failed",
  );

  // The re-upload writes the bytes again under the blob's key (wrote=1), and waits to commit.
  const again = await pausedDuring(
    "wrote=1",
    () => upload(bytes, "again.jpg"),
    async () => {
      expect((await admin.request("DELETE", `/api/admin/images/${first.id}`)).status).toBe(204);
      // The blob.delete job removes the row, then the objects under its key: the one just written too.
      await until("the old blob's row and object gone", () => readDb("SELECT id FROM blobs WHERE sha256 = ?", digest).length === 0 && !existsSync(lostFile));
    },
  );

  expect(await served(again.id)).toEqual({ status: 200, sha: digest });
  const [blob] = readDb<{ storage_key: string }>("SELECT storage_key FROM blobs WHERE sha256 = ?", digest);
  expect(blob!.storage_key).not.toBe(lost!.storage_key);
  expect(existsSync(join(server.dataDir, "storage", blob!.storage_key))).toBe(true);
});

test("H1: a re-upload of a blob whose last copy is found missing before it commits writes the bytes again", async () => {
  const bytes = await makeJpeg(150, 100, 5454);
  const digest = sha256(bytes);
  const first = await upload(bytes, "first.jpg");
  const [blob] = readDb<{ id: number; storage_key: string }>("SELECT id, storage_key FROM blobs WHERE sha256 = ?", digest);
  const file = join(server.dataDir, "storage", blob!.storage_key);

  const again = await pausedDuring(
    "wrote=0",
    () => upload(bytes, "again.jpg"),
    async () => {
      // The blob stays (a reference holds it), but its only object goes and a read marks it failed.
      rmSync(file);
      expect((await served(first.id)).status).not.toBe(200);
      await until(
        "the replica marked failed",
        () => readDb<{ state: string }>("SELECT state FROM blob_channels WHERE blob_id = ?", blob!.id)[0]?.state === "failed",
      );
    },
  );

  expect(await served(again.id)).toEqual({ status: 200, sha: digest });
  expect(await served(first.id)).toEqual({ status: 200, sha: digest });
});

test("H2: an upload whose only copy went to a channel purged before it commits writes it again to a channel in service", async () => {
  const bDir = join(server.dataDir, "channel-b");
  mkdirSync(bDir);
  // B is the best channel, so the upload writes its one synchronous copy there.
  const b = await admin.json<{ id: number }>("POST", "/api/admin/channels", { name: "b", template: "local", inputs: { path: bDir }, priority: 1000 }, 201);
  const bytes = await makeJpeg(150, 100, 5353);
  const digest = sha256(bytes);

  const uploaded = await pausedDuring(
    "wrote=1",
    () => upload(bytes, "late.jpg"),
    async () => {
      // The sole-copy check passes: the upload's blob does not exist yet.
      expect((await admin.request("DELETE", `/api/admin/channels/${b.id}?purge=true`)).status).toBe(202);
    },
  );

  const [blob] = readDb<{ id: number; storage_key: string }>("SELECT id, storage_key FROM blobs WHERE sha256 = ?", digest);
  // Recorded on the channel in service only; nothing of it left on B for the drain to take.
  expect(readDb("SELECT channel_id, state FROM blob_channels WHERE blob_id = ?", blob!.id)).toEqual([{ channel_id: 1, state: "done" }]);
  expect(existsSync(join(bDir, blob!.storage_key))).toBe(false);
  expect(await served(uploaded.id)).toEqual({ status: 200, sha: digest });
});

test("L2: an upload whose user or token is deleted, or whose user is stopped, before it commits ends as their next request would", async () => {
  await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 1_000_000 });
  const tokenUpload = (token: string, seed: number) => async () => {
    const res = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: form(await makeJpeg(80, 60, seed), "late.jpg"),
    });
    return { status: res.status, body: await res.json() };
  };
  const newUser = async (name: string) => {
    const user = await admin.json<{ id: string }>("POST", "/api/admin/users", { name, password: `${name}-pass-1` }, 201);
    const session = new Session(server);
    expect((await session.login(name, `${name}-pass-1`)).status).toBe(200);
    const { token } = await session.json<{ token: string }>("POST", "/api/admin/tokens", { name: "t" }, 201);
    return { id: user.id, token };
  };

  // The token is revoked and deleted (a foreign key of the image row, until now a 500).
  const own = await admin.json<{ id: number; token: string }>("POST", "/api/admin/tokens", { name: "going" }, 201);
  const tokenGone = await pausedDuring("wrote=1", tokenUpload(own.token, 5401), async () => {
    expect((await admin.request("POST", `/api/admin/tokens/${own.id}/revoke`)).status).toBe(204);
    expect((await admin.request("DELETE", `/api/admin/tokens/${own.id}`)).status).toBe(204);
  });
  expect(tokenGone).toEqual({ status: 401, body: { error: "上传令牌已被删除" } });

  // The token is revoked, or rotated, while the body arrives (authorization audit MED-1): no image, no write kept.
  const revoked = await admin.json<{ id: number; token: string }>("POST", "/api/admin/tokens", { name: "revoked" }, 201);
  const afterRevoke = await pausedDuring("wrote=1", tokenUpload(revoked.token, 5404), async () => {
    expect((await admin.request("POST", `/api/admin/tokens/${revoked.id}/revoke`)).status).toBe(204);
  });
  expect(afterRevoke).toEqual({ status: 401, body: { error: "上传令牌已被吊销或已过期" } });
  const rotated = await admin.json<{ id: number; token: string }>("POST", "/api/admin/tokens", { name: "rotated" }, 201);
  // A rotation counts from whole seconds: one in the second the upload started would not be seen.
  await Bun.sleep(1100 - (Date.now() % 1000));
  const afterRotate = await pausedDuring("wrote=1", tokenUpload(rotated.token, 5405), async () => {
    await Bun.sleep(1100 - (Date.now() % 1000));
    expect((await admin.request("POST", `/api/admin/tokens/${rotated.id}/rotate`)).status).toBe(200);
  });
  expect(afterRotate).toEqual({ status: 401, body: { error: "上传令牌已在上传期间被轮换，请用新令牌重新上传" } });
  expect(readDb("SELECT id FROM images WHERE token_id IN (?, ?)", revoked.id, rotated.id)).toEqual([]);

  // The user is deleted (allowed: no images yet).
  const deleted = await newUser("racer-a");
  const userGone = await pausedDuring("wrote=1", tokenUpload(deleted.token, 5402), async () => {
    expect((await admin.request("DELETE", `/api/admin/users/${deleted.id}`)).status).toBe(204);
  });
  expect(userGone).toEqual({ status: 401, body: { error: "上传者的账号已被删除" } });

  // The user is stopped.
  const stopped = await newUser("racer-b");
  const userStopped = await pausedDuring("wrote=1", tokenUpload(stopped.token, 5403), async () => {
    const change = { name: "racer-b", role: "user", quota_bytes: null, default_ttl_hours: null, disabled: true };
    expect((await admin.request("PUT", `/api/admin/users/${stopped.id}`, change)).status).toBe(200);
  });
  expect(userStopped).toEqual({ status: 403, body: { error: "该账号已被停用" } });
  expect(readDb("SELECT id FROM images WHERE user_id = ?", stopped.id)).toEqual([]);
  expect(readDb("SELECT id FROM upload_intents")).toEqual([]);
});

test("L3: a copy to another channel that lands after its blob was physically deleted is removed at once, without a failed job", async () => {
  await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
  const cDir = join(server.dataDir, "channel-c");
  mkdirSync(cDir);
  // C below the built-in channel: uploads write there first and a job copies them to C.
  await admin.json("POST", "/api/admin/channels", { name: "c", template: "local", inputs: { path: cDir }, priority: -1000 }, 201);
  const bytes = await makeJpeg(150, 100, 5555);
  const digest = sha256(bytes);
  const copyOnC = () => listFiles(cDir).filter((f) => f.includes(digest));

  let id = "";
  await pauses.during(
    "replicate.put",
    digest,
    async () => {
      id = (await upload(bytes, "short-lived.jpg")).id;
    },
    async () => {
      // The job holds its source; the image goes and, with no grace, its blob row and objects.
      await until("the upload", () => id !== "");
      expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
      await until("the blob's physical delete", () => readDb("SELECT id FROM blobs WHERE sha256 = ?", digest).length === 0);
    },
  );
  // Released, the copy is written, then removed, since no blob names it.
  await until("the late copy on C removed", () => copyOnC().length === 0, 5_000);
  await Bun.sleep(200);
  expect(copyOnC()).toEqual([]);
  expect(server.logs).not.toContain("FOREIGN KEY");
});

test("L4: a variant rendered while its blob was physically deleted is served to its request and kept nowhere", async () => {
  await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
  const bytes = await makeJpeg(800, 600, 5656);
  const digest = sha256(bytes);
  const { id } = await upload(bytes, "resized.jpg");
  const cached = () => listFiles(join(server.dataDir, "variants")).filter((f) => f.includes(digest));

  const res = await pauses.during(
    "variant.store",
    digest,
    () => fetch(server.url(`/i/${id}?w=320&format=webp`)),
    async () => {
      expect((await admin.request("DELETE", `/api/admin/images/${id}`)).status).toBe(204);
      await until("the blob's physical delete", () => readDb("SELECT id FROM blobs WHERE sha256 = ?", digest).length === 0);
    },
  );
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("image/webp");
  expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(0);
  expect(cached()).toEqual([]);
  expect(server.logs).not.toContain("FOREIGN KEY");
});

test("an upload whose second synchronous channel is removed (purge=false) before it commits is recorded on the one left", async () => {
  const eDir = join(server.dataDir, "channel-e");
  mkdirSync(eDir);
  const e = await admin.json<{ id: number }>("POST", "/api/admin/channels", { name: "e", driver: "local", config: { path: eDir }, priority: 2000 }, 201);
  await admin.json("PUT", "/api/admin/config", { min_success: 2 });
  try {
    const bytes = await makeJpeg(150, 100, 5757);
    const uploaded = await pausedDuring(
      "wrote=2",
      () => upload(bytes, "two-copies.jpg"),
      async () => {
        // Its blob does not exist yet, so no sole copy stops the removal.
        expect((await admin.request("DELETE", `/api/admin/channels/${e.id}?purge=false`)).status).toBe(204);
      },
    );
    expect(await served(uploaded.id)).toEqual({ status: 200, sha: sha256(bytes) });
    const [blob] = readDb<{ id: number }>("SELECT id FROM blobs WHERE sha256 = ?", sha256(bytes));
    expect(readDb("SELECT channel_id, state FROM blob_channels WHERE blob_id = ?", blob!.id)).toContainEqual({ channel_id: 1, state: "done" });
  } finally {
    await admin.json("PUT", "/api/admin/config", { min_success: 1 });
  }
});
