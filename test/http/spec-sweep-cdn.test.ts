/**
 * Spec sweep, CDN purge (spec 3.4, 4.13) and S3 delete audit: every generated variant URL is
 * purged even after the local cache evicted it; S3 DeleteObject/DeleteObjects purge and are
 * audited; a dedup merge purges nothing.
 */
import { DeleteObjectCommand, DeleteObjectsCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, sha256 } from "../helpers/images";
import { sdkClient, type S3Credential } from "../s3/s3-setup";

/** Every purged URL of an image: `/i/<id>` and `/i/<id>.<ext>`, each with the given query forms; sorted. */
const withExtensionForms = (link: string, ext: string, queries: string[]) => [link, `${link}.${ext}`].flatMap((base) => queries.map((q) => base + q)).sort();
import { queryDb } from "./channels.helpers";

/** A local stand-in for the provider's purge-by-URL endpoint. */
function startFakeCdn() {
  const calls: string[][] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      calls.push(((await req.json()) as { files: string[] }).files);
      return Response.json({ success: true, errors: [], result: { id: "x" } });
    },
  });
  return { calls, base: `http://127.0.0.1:${server.port}/client/v4`, stop: () => server.stop(true) };
}

async function until<T>(probe: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

const BASE_URL = "https://img.example.test";

describe("spec sweep: CDN purge and S3 deletes", () => {
  let cdn: ReturnType<typeof startFakeCdn>;
  let s3: S3Client;
  let cred: S3Credential;
  let seed = 300;

  beforeAll(async () => {
    cdn = startFakeCdn();
  });
  const { server, admin } = useAdmin(() => ({ env: { KURA_CDN_API_BASE: cdn.base } }));
  beforeAll(async () => {
    await admin.json("PUT", "/api/admin/config", {
      base_url: BASE_URL,
      cdn_provider_zone_id: "zone-1",
      cdn_provider_api_token: "token-1",
      process_widths: [16, 32],
      process_formats: ["webp", "jpeg", "png"],
    });
    const token = await admin.json("POST", "/api/admin/tokens", { name: "sweep-s3" }, 201);
    cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
    // base_url names the public CDN host; the client talks to this server directly.
    s3 = sdkClient({ ...cred, endpoint: cred.endpoint.replace(BASE_URL, server.base) });
  });
  afterAll(async () => {
    s3?.destroy();
    cdn.stop();
  });

  const purgedFor = (id: string) => cdn.calls.filter((files) => files.some((f) => f.startsWith(`${BASE_URL}/i/${id}`))).flat();
  const fetchOk = async (path: string) => {
    const res = await fetch(server.url(path));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };
  /** Puts an object over S3 and returns the short ID it got. */
  const putObject = async (key: string) => {
    const bytes = await makeJpeg(40, 30, seed++);
    await s3.send(new PutObjectCommand({ Bucket: cred.bucket, Key: key, Body: bytes, ContentType: "image/jpeg" }));
    const [row] = queryDb<{ id: string }>(server, "SELECT id FROM images WHERE object_key = ?", key);
    return row!.id;
  };

  test("item 1: a variant the local cache evicted is still purged when its image is deleted", async () => {
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(64, 48, seed++), "evict.jpg"));
    await fetchOk(`/i/${id}?w=32&format=webp`);
    await fetchOk(`/i/${id}?format=png`);
    const variantsDir = join(server.dataDir, "variants");
    expect(listFiles(variantsDir).length).toBe(2);
    // Shrinking the cache to nothing evicts both files (LRU eviction, not an image delete).
    await admin.json("PUT", "/api/admin/config", { variants_cache_mb: 0 });
    await until(() => (listFiles(variantsDir).length === 0 ? true : undefined), "variant files evicted");

    await admin.json("DELETE", `/api/admin/images/${id}`, undefined, 204);
    const link = `${BASE_URL}/i/${id}`;
    const files = await until(() => (purgedFor(id).length ? purgedFor(id) : undefined), "purge call");
    expect([...files].sort()).toEqual(withExtensionForms(link, "jpg", ["", "?format=jpeg", "?format=png", "?w=32", "?w=32&format=webp"]));
    await admin.json("PUT", "/api/admin/config", { variants_cache_mb: 1024 });
  });

  test("S3 DeleteObject and DeleteObjects purge at once, and item 9: both are audited", async () => {
    const single = await putObject("sweep/one.jpg");
    const a = await putObject("sweep/two.jpg");
    const b = await putObject("sweep/three.jpg");
    await fetchOk(`/i/${single}?format=webp`);
    await fetchOk(`/i/${a}?w=16`);

    await s3.send(new DeleteObjectCommand({ Bucket: cred.bucket, Key: "sweep/one.jpg" }));
    const link = (id: string) => `${BASE_URL}/i/${id}`;
    const one = await until(() => (purgedFor(single).length ? purgedFor(single) : undefined), "DeleteObject purge");
    expect([...one].sort()).toEqual(withExtensionForms(link(single), "jpg", ["", "?format=jpeg", "?format=webp"]));

    const out = await s3.send(new DeleteObjectsCommand({ Bucket: cred.bucket, Delete: { Objects: [{ Key: "sweep/two.jpg" }, { Key: "sweep/three.jpg" }] } }));
    expect(out.Deleted?.length).toBe(2);
    const two = await until(() => (purgedFor(a).length ? purgedFor(a) : undefined), "DeleteObjects purge of the first key");
    expect([...two].sort()).toEqual(withExtensionForms(link(a), "jpg", ["", "?format=jpeg", "?w=16", "?w=16&format=jpeg"]));
    expect([...(await until(() => (purgedFor(b).length ? purgedFor(b) : undefined), "DeleteObjects purge of the second key"))].sort()).toEqual(
      withExtensionForms(link(b), "jpg", ["", "?format=jpeg"]),
    );

    // Audited like an admin delete, by the token's owner.
    const me = await admin.json("GET", "/api/admin/me");
    for (const [id, key] of [
      [single, "sweep/one.jpg"],
      [a, "sweep/two.jpg"],
      [b, "sweep/three.jpg"],
    ] as const) {
      const entries = (await admin.json("GET", `/api/admin/audit?action=image.delete&target=${id}`)).items;
      expect(entries.length).toBe(1);
      expect(entries[0].actor).toBe(me.user?.id ?? me.id);
      expect(entries[0].detail).toContain(key);
    }
  });

  test("a dedup merge re-points images without purging them", async () => {
    const bytesA = await makeJpeg(50, 40, seed++);
    const bytesB = await makeJpeg(50, 40, seed++);
    const { id: keepId } = await admin.json("POST", "/api/admin/upload", form(bytesA, "keep.jpg"));
    const { id: movedId } = await admin.json("POST", "/api/admin/upload", form(bytesB, "moved.jpg"));
    await fetchOk(`/i/${movedId}?format=webp`);
    const blobOf = (bytes: Buffer) => queryDb<{ id: number }>(server, "SELECT id FROM blobs WHERE sha256 = ?", sha256(bytes))[0]!.id;
    const [keepBlob, movedBlob] = [blobOf(bytesA), blobOf(bytesB)];
    // The candidate a perceptual-hash scan would have found (the scan itself is tested in review.test.ts).
    const { Database } = await import("bun:sqlite");
    const db = new Database(join(server.dataDir, "kura.db"));
    db.query("INSERT INTO dedup_candidates (blob_a, blob_b, distance, created_at) VALUES (?, ?, 3, '2020-01-01 00:00:00')").run(keepBlob, movedBlob);
    db.close();
    const [candidate] = (await admin.json("GET", "/api/admin/dedup")).items;
    await admin.json("POST", `/api/admin/dedup/${candidate.id}/merge`, { keep_blob_id: keepBlob }, 204);
    expect((await admin.json("GET", `/api/admin/images/${movedId}`)).sha256).toBe(sha256(bytesA));

    // Control: a delete right after the merge is purged, through the same queue.
    const { id: control } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(50, 40, seed++), "control.jpg"));
    await admin.json("DELETE", `/api/admin/images/${control}`, undefined, 204);
    await until(() => (purgedFor(control).length ? true : undefined), "control purge");
    // Absence by state: no purge job was ever queued for the merged images.
    const jobs = queryDb<{ payload: string }>(server, "SELECT payload FROM jobs WHERE kind = 'cdn.purge'");
    expect(jobs.some((j) => j.payload.includes(`/i/${control}`))).toBe(true);
    for (const id of [keepId, movedId]) {
      expect(jobs.some((j) => j.payload.includes(`/i/${id}`))).toBe(false);
      expect(purgedFor(id)).toEqual([]);
    }
  });
});
