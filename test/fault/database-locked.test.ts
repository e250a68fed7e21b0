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
import sharp from "sharp";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";

const { server, admin } = useAdmin();

/**
 * Another process's connection to the server's kura.db, as an operator's `sqlite3` shell. It waits for
 * the server's own short transactions before taking the lock (on a busy machine a background round's
 * write was in progress at that moment, and BEGIN IMMEDIATE failed at once).
 */
function operatorShell(): Database {
  const db = new Database(join(server.dataDir, "kura.db"));
  db.run("PRAGMA busy_timeout = 5000");
  return db;
}

/** Ends the shell's transaction, if it began one. */
function letGo(db: Database) {
  if (db.inTransaction) db.run("ROLLBACK");
}

/** Until every opening of the lock breaker logged so far has its closing. */
async function untilBreakerClosed() {
  const count = (pattern: RegExp) => server.logs.match(pattern)?.length ?? 0;
  const open = () => count(/数据库被其他进程长时间锁定/g) > count(/数据库锁已释放/g);
  for (const deadline = Date.now() + 10_000; open() && Date.now() < deadline; ) await Bun.sleep(50);
  expect(open()).toBe(false);
}

test("a lock held for a moment (1 s, under the busy timeout) is waited out: an upload and a delete go through", async () => {
  const png = await makePng(30, 20, 3);
  const db = operatorShell();
  /** `request` sent while another connection holds the write lock, which goes after 1 s. */
  const underBriefLock = async (request: () => Promise<Response>) => {
    db.run("BEGIN IMMEDIATE");
    const answer = request();
    await Bun.sleep(1_000);
    letGo(db);
    return answer;
  };
  try {
    const stored = await underBriefLock(() => admin.request("POST", "/api/admin/upload", form(png, "brief.png")));
    const { id } = (await stored.json()) as { id: string };
    expect([stored.status, typeof id]).toEqual([200, "string"]);
    const removed = await underBriefLock(() => admin.request("DELETE", `/api/admin/images/${id}`));
    expect(removed.status).toBe(204);
  } finally {
    db.close();
  }
  // Nothing met the lock past the busy timeout: the breaker never opened.
  expect(server.logs).not.toMatch(/数据库被锁定|数据库被其他进程长时间锁定/);
}, 60_000);

test("an upload while another process holds the database's write lock: a retryable 503, nothing kept, then it works", async () => {
  const png = await makePng(30, 20, 4);
  const storage = join(server.dataDir, "storage");
  const before = listFiles(storage);
  const db = operatorShell();
  let refused: Response;
  try {
    db.run("BEGIN IMMEDIATE");
    refused = await admin.request("POST", "/api/admin/upload", form(png, "locked.png"));
  } finally {
    letGo(db);
    db.close();
  }
  expect([refused.status, refused.headers.get("retry-after"), await refused.json()]).toEqual([503, "5", { error: "服务器数据库暂时被占用，请稍后重试" }]);
  // The answer names the logged line: the same request id in its X-Request-Id.
  const requestId = refused.headers.get("x-request-id");
  expect(requestId).toMatch(/^[0-9a-f]{16}$/);
  await server.waitForLog(
    new RegExp(
      `level=ERROR msg="数据库被锁定（另一个连接长时间持有写锁），请求失败：.*sqlite3.*" method=POST path=/api/admin/upload request_id=${requestId} err="database is locked"`,
    ),
  );
  expect(server.logs).not.toMatch(/msg=请求处理失败/);
  // The bytes it had written to the channel went again.
  expect(listFiles(storage)).toEqual(before);
  expect(listFiles(join(server.dataDir, "tmp"))).toEqual([]);

  const stored = await admin.request("POST", "/api/admin/upload", form(png, "unlocked.png"));
  expect(stored.status).toBe(200);
  expect(listFiles(storage).length).toBe(before.length + 1);
}, 60_000);

test("while the lock stays, only the first write waits out the busy timeout: the next answer at once, and writes resume when it goes", async () => {
  // The first test's lock opened the breaker; its probe closed it once the lock was gone (each
  // opening is followed by its closing).
  await untilBreakerClosed();
  const mark = server.logs.length;
  const png = await makePng(30, 20, 5);
  const answers: { status: number; ms: number }[] = [];
  let longestHealthz = 0;
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const started = performance.now();
      await (await fetch(server.url("/healthz"))).text();
      longestHealthz = Math.max(longestHealthz, performance.now() - started);
      await Bun.sleep(20);
    }
  })();
  const db = operatorShell();
  try {
    db.run("BEGIN IMMEDIATE");
    for (let i = 0; i < 4; i++) {
      const started = performance.now();
      const res = await admin.request("POST", "/api/admin/upload", form(png, `held-${i}.png`));
      await res.text();
      answers.push({ status: res.status, ms: performance.now() - started });
    }
    await Bun.sleep(4_500); // the job queue polls every 2 s: a few more rounds meet the lock
  } finally {
    probing = false;
    letGo(db);
    db.close();
    await probe;
  }
  expect(answers.map((a) => a.status)).toEqual([503, 503, 503, 503]);
  expect(answers[0]!.ms).toBeGreaterThan(4_500); // the busy timeout, once
  expect(answers[0]!.ms).toBeLessThan(8_000); // not a background round's wait on top of it
  // Each would take the busy timeout (5 s) if it waited: half of that leaves room for busy cores.
  expect(Math.max(...answers.slice(1).map((a) => a.ms))).toBeLessThan(2_500);
  // The loop was held for that one wait, not for four of them (20 s).
  expect(longestHealthz).toBeLessThan(7_000);
  const during = server.logs.slice(mark);
  expect(during.match(/msg="?数据库被其他进程长时间锁定/g)?.length).toBe(1);
  // Background rounds and the job queue's polls failing meanwhile say so once each, not every round.
  const failing = [...during.matchAll(/msg=后台任务执行失败 loop=(\S+)/g)].map((m) => m[1]!);
  expect(failing).toEqual([...new Set(failing)]);
  expect(during).not.toMatch(/任务队列轮询失败/);

  // The probe (every second) finds the lock gone.
  for (const deadline = Date.now() + 5_000; !/msg=数据库锁已释放，写入恢复正常/.test(server.logs.slice(mark)) && Date.now() < deadline; ) await Bun.sleep(50);
  expect(server.logs.slice(mark)).toMatch(/msg=数据库锁已释放，写入恢复正常/);
  const stored = await admin.request("POST", "/api/admin/upload", form(png, "after.png"));
  expect(stored.status).toBe(200);
}, 60_000);

test("a variant rendered while the lock stays is served but not kept: no cache file that no row records", async () => {
  await untilBreakerClosed();
  const { id } = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(await makePng(400, 300, 6), "variant.png"));
  const variants = join(server.dataDir, "variants");
  const before = listFiles(variants);
  const variant = () => fetch(server.url(`/i/${id}?w=320&format=webp`));
  const db = operatorShell();
  let served: Response;
  try {
    db.run("BEGIN IMMEDIATE");
    const started = performance.now();
    served = await variant();
    // One busy timeout (the variant's row), not a background round's on top of it.
    expect(performance.now() - started).toBeLessThan(8_000);
    expect([served.status, served.headers.get("content-type")]).toEqual([200, "image/webp"]);
    expect((await sharp(Buffer.from(await served.arrayBuffer())).metadata()).width).toBe(320);
    expect(listFiles(variants)).toEqual(before);
  } finally {
    letGo(db);
    db.close();
  }
  await server.waitForLog(/msg=变体缓存无法写入，渲染结果直接返回但不缓存 err="database is locked"/);
  // Once the lock is gone, the next request renders it again and keeps it.
  for (const deadline = Date.now() + 5_000; listFiles(variants).length === before.length && Date.now() < deadline; ) {
    await (await variant()).arrayBuffer();
    await Bun.sleep(200);
  }
  expect(listFiles(variants).length).toBe(before.length + 1);
}, 60_000);
