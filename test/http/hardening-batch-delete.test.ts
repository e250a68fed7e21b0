import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import type { KuraServer } from "../helpers/server";

/** Runs SQL against the live server's database from outside (fault injection). */
function withDb(server: KuraServer, sql: string) {
  const db = new Database(join(server.dataDir, "kura.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec(sql);
  } finally {
    db.close();
  }
}

describe("row 10: batch delete isolates each item", () => {
  const { server, admin } = useAdmin();

  test("a database error on one id leaves the others deleted and is reported for that id only", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 400 + i), `b${i}.jpg`))).id);
    const [first, broken, last] = ids as [string, string, string];
    // A real SQLite failure for exactly one row: the delete statement aborts.
    withDb(server, `CREATE TRIGGER injected_fault BEFORE DELETE ON images WHEN old.id = '${broken}' BEGIN SELECT RAISE(ABORT, 'injected fault'); END`);
    try {
      const result = await admin.json("POST", "/api/admin/images/batch-delete", { ids: [first, broken, last, "missing0000"] });
      expect(result.deleted).toBe(2);
      expect(result.failed).toHaveLength(2);
      expect(result.failed[0].id).toBe(broken);
      expect(result.failed[0].error).toMatch(/删除失败/);
      expect(result.failed[1]).toEqual({ id: "missing0000", error: "图片不存在" });
      await expectError(await admin.request("GET", `/api/admin/images/${first}`), 404);
      await expectError(await admin.request("GET", `/api/admin/images/${last}`), 404);
      // The failed one is whole: its reference and its bytes are still there.
      expect((await admin.json("GET", `/api/admin/images/${broken}`)).ref_count).toBe(1);
      expect((await fetch(server.url(`/i/${broken}`))).status).toBe(200);
      // The cause goes to the log, not to the client.
      await server.waitForLog(new RegExp(`image=${broken}`));
      expect(JSON.stringify(result)).not.toContain("injected");
    } finally {
      withDb(server, "DROP TRIGGER injected_fault");
    }
    // Once the fault is gone the same request deletes it.
    expect((await admin.json("POST", "/api/admin/images/batch-delete", { ids: [broken] })).deleted).toBe(1);
  });
});
