/**
 * Multipart uploads under unlucky or hostile clients (audit findings F2, F3, F9), black-box against a
 * real Kura with raw SigV4 requests:
 *  - an upload id belongs to its key: UploadPart, Complete and Abort sent with another key are
 *    404 NoSuchUpload and change nothing;
 *  - Complete, Abort, UploadPart and expiry of one upload run one at a time: whoever loses a race
 *    answers 404 NoSuchUpload (never 500), nothing partial is stored, nothing is left in tmp;
 *  - two uploads of one part number: the body that arrived last replaces the other and is staged once;
 *    only its ETag completes, the other (also acknowledged with 200) is InvalidPart, as in S3.
 *
 * Races are staged, not hoped for. The test-only pause `s3.multipart` (src/testing/hold-points.ts)
 * parks one chosen request at the step the race is about; then the other request is sent, and the
 * test waits until that one either answers (no lock) or logs the mark `s3.multipart-queued` (it waits
 * for the upload's lock) before releasing the first.
 */
import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { PausePoints } from "../helpers/pause-points";
import { listFiles } from "../helpers/files";
import { makeJpeg } from "../helpers/images";
import { s3User, type S3Credential, type S3Fixture, signedRequest } from "./s3-setup";

const pauses = new PausePoints();
const { server, admin } = useAdmin({ env: pauses.env("s3.multipart", "s3.multipart-queued") });
let f: S3Fixture;
beforeAll(async () => {
  const token = await admin.json("POST", "/api/admin/tokens", { name: "s3-integrity" }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  f = { server, admin, tokenId: token.id, cred };
});

const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("hex");
const s3 = (method: string, key: string, opts: { body?: Uint8Array | string; cred?: S3Credential } = {}) => signedRequest(f, method, `/s3/kura/${key}`, opts);

async function create(key: string, cred?: S3Credential): Promise<string> {
  const res = await s3("POST", `${key}?uploads=`, { cred });
  const text = await res.text();
  expect(res.status).toBe(200);
  return /<UploadId>([0-9a-f]+)<\/UploadId>/.exec(text)![1]!;
}
const putPart = (key: string, id: string, n: number, body: Uint8Array, cred?: S3Credential) =>
  s3("PUT", `${key}?partNumber=${n}&uploadId=${id}`, { body, cred });
const complete = (key: string, id: string, parts: [number, string][], cred?: S3Credential) =>
  s3("POST", `${key}?uploadId=${id}`, {
    body: `<CompleteMultipartUpload>${parts.map(([n, etag]) => `<Part><PartNumber>${n}</PartNumber><ETag>"${etag}"</ETag></Part>`).join("")}</CompleteMultipartUpload>`,
    cred,
  });
const abort = (key: string, id: string) => s3("DELETE", `${key}?uploadId=${id}`);

/** An S3 XML error with this status and Code (not Kura's JSON, not a 500). */
async function expectS3Error(res: Response, status: number, code: string) {
  const text = await res.text();
  expect({ status: res.status, code: /<Code>([^<]+)<\/Code>/.exec(text)?.[1] }).toEqual({ status, code });
  expect(res.headers.get("content-type")).toBe("application/xml");
  expect(text).toContain("<Error>");
}

/** GET bytes of a key, or the status when there is none. */
async function objectBytes(key: string): Promise<Uint8Array | number> {
  const res = await s3("GET", key);
  const bytes = new Uint8Array(await res.arrayBuffer());
  return res.status === 200 ? bytes : res.status;
}

/** The upload's staged_bytes (quota), or undefined once its row is gone. */
function stagedBytes(uploadId: string): number | undefined {
  const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
  try {
    return db.query<{ staged_bytes: number }, [string]>("SELECT staged_bytes FROM multipart_uploads WHERE upload_id = ?").get(uploadId)?.staged_bytes;
  } finally {
    db.close();
  }
}

/** Names in the upload's parts dir (`<n>.<md5>`). */
const partFiles = (uploadId: string) => {
  const dir = join(server.dataDir, "multipart", uploadId);
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};

/** Nothing of this upload left (no parts dir, no part being received), and no temp file of an object being stored. */
function expectNoLeftovers(uploadId: string) {
  expect(readdirSync(join(server.dataDir, "multipart")).filter((name) => name.startsWith(uploadId))).toEqual([]);
  expect(listFiles(join(server.dataDir, "tmp"))).toEqual([]);
}

async function usedBytes(userName: string): Promise<number> {
  const users = await admin.json("GET", "/api/admin/users?page_size=100");
  return users.items.find((u: { name: string }) => u.name === userName).used_bytes;
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Waits until `pattern` is in the server log ("logged") or `pending` has answered ("answered"), whichever is first. */
async function loggedOrAnswered(pattern: RegExp, pending: Promise<Response>): Promise<"logged" | "answered"> {
  let answered = false;
  pending.then(
    () => (answered = true),
    () => (answered = true),
  );
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await Bun.sleep(10)) {
    if (pattern.test(server.logs)) return "logged";
    if (answered) return "answered";
  }
  throw new Error(`neither ${pattern} in the log nor an answer:\n${server.logs}`);
}

/**
 * Parks `first` at the pause whose detail contains `at`, sends `second`, waits until the second
 * either answered or queued behind the first (op `queuedAs`), then releases the first.
 */
async function race(at: string, first: () => Promise<Response>, second: () => Promise<Response>, queuedAs: string, uploadId: string) {
  pauses.arm("s3.multipart", at);
  const a = first();
  let b: Promise<Response> | undefined;
  let secondState: "logged" | "answered" | undefined;
  try {
    expect(await loggedOrAnswered(new RegExp(`paused point=s3\\.multipart ${escaped(at)}`), a)).toBe("logged");
    b = second();
    secondState = await loggedOrAnswered(new RegExp(`reached point=s3\\.multipart-queued op=${escaped(queuedAs)} upload=${uploadId}`), b);
  } finally {
    pauses.release("s3.multipart");
  }
  return { first: await a, second: await b!, secondQueued: secondState === "logged" };
}

describe("an upload id belongs to its key (F2)", () => {
  test("UploadPart, Complete and Abort with another key are 404 NoSuchUpload and change nothing; at its own key the upload still completes", async () => {
    const [a, b] = [await makeJpeg(64, 48, 11), await makeJpeg(64, 48, 12)];
    expect((await s3("PUT", "photos/keep.jpg", { body: a })).status).toBe(200);
    const id = await create("photos/keep.jpg");
    expect((await putPart("photos/keep.jpg", id, 1, b)).status).toBe(200);

    await expectS3Error(await putPart("new/other.jpg", id, 1, a), 404, "NoSuchUpload");
    await expectS3Error(await putPart("photos/keep.jpg/x", id, 2, a), 404, "NoSuchUpload");
    await expectS3Error(await complete("new/other.jpg", id, [[1, md5(b)]]), 404, "NoSuchUpload");
    await expectS3Error(await complete("photos/Keep.jpg", id, [[1, md5(b)]]), 404, "NoSuchUpload");
    await expectS3Error(await abort("zzz/unrelated.jpg", id), 404, "NoSuchUpload");

    // Nothing moved: the original object, the upload's one part, its staged bytes, its listing.
    expect(await objectBytes("photos/keep.jpg")).toEqual(new Uint8Array(a));
    expect(await objectBytes("new/other.jpg")).toBe(404);
    expect(partFiles(id)).toEqual([`1.${md5(b)}`]);
    expect(stagedBytes(id)).toBe(b.length);
    expect(await (await signedRequest(f, "GET", "/s3/kura?uploads=")).text()).toContain(`<UploadId>${id}</UploadId>`);

    const done = await complete("photos/keep.jpg", id, [[1, md5(b)]]);
    expect(done.status).toBe(200);
    expect(await done.text()).toContain("<Key>photos/keep.jpg</Key>");
    expect(await objectBytes("photos/keep.jpg")).toEqual(new Uint8Array(b));
    expect(stagedBytes(id)).toBeUndefined();
    expectNoLeftovers(id);
  });
});

describe("one request at a time per upload; the loser of a race is 404 NoSuchUpload (F3)", () => {
  test("Abort during a Complete waits for it, then answers 404 NoSuchUpload; the object is stored whole", async () => {
    const bytes = await makeJpeg(64, 48, 21);
    const id = await create("race/complete-abort.jpg");
    expect((await putPart("race/complete-abort.jpg", id, 1, bytes)).status).toBe(200);
    const used = await usedBytes("admin");
    const r = await race(
      `op=complete upload=${id}`,
      () => complete("race/complete-abort.jpg", id, [[1, md5(bytes)]]),
      () => abort("race/complete-abort.jpg", id),
      "abort",
      id,
    );
    expect(r.first.status).toBe(200);
    await expectS3Error(r.second, 404, "NoSuchUpload");
    expect(r.secondQueued).toBe(true);
    expect(await objectBytes("race/complete-abort.jpg")).toEqual(new Uint8Array(bytes));
    expect(await usedBytes("admin")).toBe(used + bytes.length);
    expect(stagedBytes(id)).toBeUndefined();
    expectNoLeftovers(id);
  });

  test("Complete during an Abort waits for it, then answers 404 NoSuchUpload and stores nothing", async () => {
    const bytes = await makeJpeg(64, 48, 22);
    const id = await create("race/abort-complete.jpg");
    expect((await putPart("race/abort-complete.jpg", id, 1, bytes)).status).toBe(200);
    const used = await usedBytes("admin");
    const r = await race(
      `op=abort upload=${id}`,
      () => abort("race/abort-complete.jpg", id),
      () => complete("race/abort-complete.jpg", id, [[1, md5(bytes)]]),
      "complete",
      id,
    );
    expect(r.first.status).toBe(204);
    await expectS3Error(r.second, 404, "NoSuchUpload");
    expect(r.secondQueued).toBe(true);
    expect(await objectBytes("race/abort-complete.jpg")).toBe(404);
    expect(await usedBytes("admin")).toBe(used);
    expect(stagedBytes(id)).toBeUndefined();
    expectNoLeftovers(id);
  });

  test("a second Complete during the first answers 404 NoSuchUpload; the object is stored once", async () => {
    const bytes = await makeJpeg(64, 48, 23);
    const id = await create("race/complete-twice.jpg");
    expect((await putPart("race/complete-twice.jpg", id, 1, bytes)).status).toBe(200);
    const used = await usedBytes("admin");
    const again = () => complete("race/complete-twice.jpg", id, [[1, md5(bytes)]]);
    const r = await race(`op=complete upload=${id}`, again, again, "complete", id);
    expect(r.first.status).toBe(200);
    await expectS3Error(r.second, 404, "NoSuchUpload");
    expect(r.secondQueued).toBe(true);
    expect(await objectBytes("race/complete-twice.jpg")).toEqual(new Uint8Array(bytes));
    expect(await usedBytes("admin")).toBe(used + bytes.length);
    expectNoLeftovers(id);
  });

  test("an UploadPart whose body arrives during a Complete answers 404 NoSuchUpload; the part is neither kept nor staged", async () => {
    const [one, two] = [await makeJpeg(64, 48, 24), await makeJpeg(64, 48, 25)];
    const id = await create("race/complete-part.jpg");
    expect((await putPart("race/complete-part.jpg", id, 1, one)).status).toBe(200);
    const r = await race(
      `op=complete upload=${id}`,
      () => complete("race/complete-part.jpg", id, [[1, md5(one)]]),
      () => putPart("race/complete-part.jpg", id, 2, two),
      "part-2",
      id,
    );
    expect(r.first.status).toBe(200);
    await expectS3Error(r.second, 404, "NoSuchUpload");
    expect(r.secondQueued).toBe(true);
    expect(await objectBytes("race/complete-part.jpg")).toEqual(new Uint8Array(one));
    expect(stagedBytes(id)).toBeUndefined();
    expectNoLeftovers(id);
  });

  test("an UploadPart that had not started its body when Abort removed the upload answers 404 NoSuchUpload (not 500), leaving no file or dir", async () => {
    const [one, two] = [await makeJpeg(64, 48, 26), await makeJpeg(64, 48, 27)];
    const id = await create("race/part-abort.jpg");
    expect((await putPart("race/part-abort.jpg", id, 1, one)).status).toBe(200);
    pauses.arm("s3.multipart", `op=part-receive upload=${id} part=2`);
    const part = putPart("race/part-abort.jpg", id, 2, two);
    try {
      expect(await loggedOrAnswered(new RegExp(`paused point=s3\\.multipart op=part-receive upload=${id}`), part)).toBe("logged");
      // Abort does not wait for a part still receiving (a slow client must not hold it up).
      expect((await abort("race/part-abort.jpg", id)).status).toBe(204);
    } finally {
      pauses.release("s3.multipart");
    }
    await expectS3Error(await part, 404, "NoSuchUpload");
    expect(stagedBytes(id)).toBeUndefined();
    expectNoLeftovers(id);
  });

  test("expiry of an abandoned upload waits for a Complete in progress, which stores the object whole", async () => {
    const bytes = await makeJpeg(64, 48, 28);
    const id = await create("race/complete-expiry.jpg");
    expect((await putPart("race/complete-expiry.jpg", id, 1, bytes)).status).toBe(200);
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("UPDATE multipart_uploads SET created_at = datetime('now', '-3 hours') WHERE upload_id = ?").run(id);
    db.close();
    pauses.arm("s3.multipart", `op=complete upload=${id}`);
    const done = complete("race/complete-expiry.jpg", id, [[1, md5(bytes)]]);
    try {
      expect(await loggedOrAnswered(new RegExp(`paused point=s3\\.multipart op=complete upload=${id}`), done)).toBe("logged");
      await admin.json("PUT", "/api/admin/config", { s3_multipart_expiry_hours: 2, cleanup_sweep_seconds: 1 });
      // The sweep runs every second: it either queues behind the Complete or (without the lock) removes the parts.
      for (const deadline = Date.now() + 30_000; Date.now() < deadline && stagedBytes(id) !== undefined; await Bun.sleep(20)) {
        if (server.logs.includes(`reached point=s3.multipart-queued op=expire upload=${id}`)) break;
      }
    } finally {
      pauses.release("s3.multipart");
    }
    const res = await done;
    await admin.json("PUT", "/api/admin/config", { s3_multipart_expiry_hours: 24, cleanup_sweep_seconds: 300 });
    expect(res.status).toBe(200);
    expect(server.logs).toContain(`reached point=s3.multipart-queued op=expire upload=${id}`);
    expect(await objectBytes("race/complete-expiry.jpg")).toEqual(new Uint8Array(bytes));
    expectNoLeftovers(id);
  });
});

describe("two uploads of one part number (F9)", () => {
  test("the body that arrived last replaces the other: one part file, staged once (quota), and only its ETag completes; the other is InvalidPart", async () => {
    const [a, b] = [await makeJpeg(96, 64, 31), await makeJpeg(96, 64, 32)];
    // Quota for both parts plus less than either: counting the part twice leaves no room for another part A.
    const slack = Math.floor(Math.min(a.length, b.length) / 2);
    const user = await s3User(f, "f9-quota", { quota_bytes: a.length + b.length + slack });
    const key = "race/same-part.jpg";
    const id = await create(key, user.cred);
    // A's body is in and A is about to take the place of part 1 when B is sent: B's body arrives last.
    const r = await race(
      `op=part-commit upload=${id} part=1`,
      () => putPart(key, id, 1, a, user.cred),
      () => putPart(key, id, 1, b, user.cred),
      "part-1",
      id,
    );
    expect([r.first.status, r.first.headers.get("etag"), r.second.status, r.second.headers.get("etag")]).toEqual([200, `"${md5(a)}"`, 200, `"${md5(b)}"`]);
    expect(partFiles(id)).toEqual([`1.${md5(b)}`]);
    expect(stagedBytes(id)).toBe(b.length);
    expect(r.secondQueued).toBe(true);

    // The quota sees B once: another upload still has room for A's size.
    const probe = await create("race/probe.jpg", user.cred);
    expect((await putPart("race/probe.jpg", probe, 1, a, user.cred)).status).toBe(200);
    expect((await s3("DELETE", `race/probe.jpg?uploadId=${probe}`, { cred: user.cred })).status).toBe(204);

    await expectS3Error(await complete(key, id, [[1, md5(a)]], user.cred), 400, "InvalidPart");
    const done = await complete(key, id, [[1, md5(b)]], user.cred);
    expect(done.status).toBe(200);
    const got = await signedRequest(f, "GET", `/s3/kura/${key}`, { cred: user.cred });
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(new Uint8Array(b));
    expect(await usedBytes("f9-quota")).toBe(b.length);
    expectNoLeftovers(id);
    expectNoLeftovers(probe);
  });
});
