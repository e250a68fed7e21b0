/**
 * Fault tier: the database locked by another process for longer than the busy timeout (5 s), for
 * real: this test holds a write transaction on the server's own kura.db, as an operator's
 * `sqlite3 kura.db` left inside `BEGIN IMMEDIATE` would. An upload then is the server's temporary
 * trouble, a retryable 503 in Chinese with an ERROR saying what to look for, not a logged 500
 * "服务器内部错误"; nothing it wrote stays behind, and it succeeds once the lock is gone.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";

const { server, admin } = useAdmin();

test("an upload while another process holds the database's write lock: a retryable 503, nothing kept, then it works", async () => {
  const png = await makePng(30, 20, 4);
  const storage = join(server.dataDir, "storage");
  const before = listFiles(storage);
  const db = new Database(join(server.dataDir, "kura.db"));
  let refused: Response;
  try {
    db.run("BEGIN IMMEDIATE");
    refused = await admin.request("POST", "/api/admin/upload", form(png, "locked.png"));
  } finally {
    db.run("ROLLBACK");
    db.close();
  }
  expect([refused.status, refused.headers.get("retry-after"), await refused.json()]).toEqual([503, "5", { error: "服务器数据库暂时被占用，请稍后重试" }]);
  expect(server.logs).toMatch(
    /level=ERROR msg="数据库被锁定（另一个连接长时间持有写锁），请求失败：.*sqlite3.*" method=POST path=\/api\/admin\/upload err="database is locked"/,
  );
  expect(server.logs).not.toMatch(/msg=请求处理失败/);
  // The bytes it had written to the channel went again.
  expect(listFiles(storage)).toEqual(before);
  expect(listFiles(join(server.dataDir, "tmp")).filter((f) => !f.startsWith("multipart"))).toEqual([]);

  const stored = await admin.request("POST", "/api/admin/upload", form(png, "unlocked.png"));
  expect(stored.status).toBe(200);
  expect(listFiles(storage).length).toBe(before.length + 1);
}, 60_000);
