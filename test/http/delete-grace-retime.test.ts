import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { settled } from "../helpers/settle";

interface ExportBlob {
  sha256: string;
  pending_delete: boolean;
  delete_after: string | null;
}

const ms = (sqlTime: string) => Date.parse(`${sqlTime.replace(" ", "T")}Z`);
const MINUTE = 60_000;

test("a changed delete_grace_minutes re-times deletes already pending, both ways; lowered to 0 they run at once", async () => {
  const server = await KuraServer.start();
  try {
    const admin = await adminSession(server);
    const blobs = async () => (await (await admin.request("GET", "/api/admin/export")).json()).blobs as ExportBlob[];
    const blobOf = async (sha: string) => (await blobs()).find((b) => b.sha256 === sha);
    const objectFiles = (sha: string) => {
      const dir = join(server.dataDir, "storage", "img", sha.slice(0, 2), sha.slice(2, 4));
      return existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith(sha)) : [];
    };
    const deleteJobRunAt = (sha: string) => {
      const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
      try {
        return db
          .query<{ run_at: number; state: string }, [string]>(
            `SELECT j.run_at, j.state FROM jobs j JOIN blobs b ON b.id = json_extract(j.payload, '$.blob_id')
             WHERE j.kind = 'blob.delete' AND b.sha256 = ? AND j.state IN ('available', 'scheduled', 'retryable')`,
          )
          .all(sha);
      } finally {
        db.close();
      }
    };
    const upload = async (seed: number) => {
      const image = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(24, 24, seed), `g${seed}.jpg`));
      return { id: image.id as string, sha: (await admin.json("GET", `/api/admin/images/${image.id}`)).sha256 as string };
    };

    // Default grace 60: deleted at t, the bytes are due at t + 60 min.
    const a = await upload(9101);
    const before = Date.now();
    await admin.json("DELETE", `/api/admin/images/${a.id}`, undefined, 204);
    const after = Date.now();
    const expectDueAfter = async (grace: number) => {
      const blob = await settled(
        () => blobOf(a.sha),
        (b) => !!b?.delete_after && ms(b.delete_after) >= Math.floor((before + grace * MINUTE) / 1000) * 1000 - 1000,
      );
      expect(blob?.pending_delete).toBe(true);
      const due = ms(blob!.delete_after!);
      // delete_after has whole seconds, the moments around the DELETE have milliseconds.
      expect(due).toBeGreaterThanOrEqual(Math.floor((before + grace * MINUTE) / 1000) * 1000);
      expect(due).toBeLessThanOrEqual(after + grace * MINUTE);
      // The job that carries the delete out waits exactly as long.
      const jobs = deleteJobRunAt(a.sha);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]!.run_at).toBeGreaterThanOrEqual(before + grace * MINUTE);
      expect(jobs[0]!.run_at).toBeLessThanOrEqual(after + grace * MINUTE);
      expect(jobs[0]!.state).toBe("scheduled");
    };
    await expectDueAfter(60);

    // Raised: the pending delete gets the longer undo window too.
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 600 });
    await expectDueAfter(600);
    // Lowered below the original: due sooner than the grace it was scheduled with.
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 30 });
    await expectDueAfter(30);
    expect(server.logs).toMatch(/msg=已按新的删除宽限期重新安排待删除的图片 grace_minutes=30 blobs=1 due_now=0/);

    // Lowered to 0 (free the disk now): every pending delete runs at once, bytes and row.
    const b = await upload(9102);
    await admin.json("DELETE", `/api/admin/images/${b.id}`, undefined, 204);
    expect(objectFiles(a.sha)).toHaveLength(1);
    expect(objectFiles(b.sha)).toHaveLength(1);
    await admin.json("PUT", "/api/admin/config", { delete_grace_minutes: 0 });
    const gone = await settled(
      async () => [objectFiles(a.sha).length, objectFiles(b.sha).length, (await blobOf(a.sha)) ?? null, (await blobOf(b.sha)) ?? null],
      (v) => v[0] === 0 && v[1] === 0 && v[2] === null && v[3] === null,
      15_000,
    );
    expect(gone).toEqual([0, 0, null, null]);
  } finally {
    await server.dispose();
  }
}, 60_000);
