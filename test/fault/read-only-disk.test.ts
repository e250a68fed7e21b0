/**
 * Fault tier: the data dir's file system turned read-only under a running server, for real: ext4
 * mounted with `errors=remount-ro` (most VPS images mount their root so) meets an error and the
 * kernel makes it read-only at once, kura.db held open for writing included. Writes answer a 503
 * in Chinese that says it is the server's storage (not a 500 with a crash log); everything stored
 * is still served, a variant still rendered (just not kept); background loops say so once instead
 * of every second; a stop ends with an ERROR per lost write and a failed exit, not a stack trace.
 * After the operator's repair (fsck, mount) the next start serves everything and takes uploads.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { adminSession, Session } from "../helpers/client";
import { form, makePng, sha256 } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";
import { mountFailableExt4 } from "./harness";

const disk = mountFailableExt4(96);
const dataDir = join(disk.dir, "data");
let server: KuraServer;
let admin: Session;
const STORAGE_FAILING = { error: "服务器存储发生故障，暂时无法写入，请稍后重试或联系管理员" };

beforeAll(async () => {
  mkdirSync(dataDir);
  server = await KuraServer.start({ dataDir });
  admin = await adminSession(server);
});
afterAll(async () => {
  await server?.stop("SIGKILL");
  disk.unmount();
});

const occurrences = (text: string, pattern: RegExp) => text.match(new RegExp(pattern.source, "g"))?.length ?? 0;

test("a data dir gone read-only: writes answer a 503, reads and renders go on, loops and the stop say so once; repaired, all is there", async () => {
  await admin.json("PUT", "/api/admin/config", { activity_flush_seconds: 1 });
  const png = await makePng(400, 300, 7);
  const stored = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(png, "kept.png"));

  disk.fail();
  const mark = server.logs.length;
  const upload = await admin.request("POST", "/api/admin/upload", form(await makePng(40, 30, 8), "lost.png"));
  expect([upload.status, upload.headers.get("retry-after"), await upload.json()]).toEqual([503, "300", STORAGE_FAILING]);
  const removal = await admin.request("DELETE", `/api/admin/images/${stored.id}`);
  expect([removal.status, await removal.json()]).toEqual([503, STORAGE_FAILING]);

  // Everything stored is still served: the original, and a variant rendered now though it cannot be kept.
  const original = await fetch(server.url(`/i/${stored.id}`));
  expect([original.status, sha256(await original.arrayBuffer())]).toEqual([200, sha256(png)]);
  for (let i = 0; i < 2; i++) {
    const variant = await fetch(server.url(`/i/${stored.id}?w=320&format=webp`));
    expect([variant.status, variant.headers.get("content-type")]).toEqual([200, "image/webp"]);
    expect((await sharp(Buffer.from(await variant.arrayBuffer())).metadata()).width).toBe(320);
  }

  await Bun.sleep(3_500); // the access flush (every second) and the name indexer fail meanwhile
  const during = server.logs.slice(mark);
  expect(during).toMatch(/level=ERROR msg="数据目录无法写入（文件系统已变为只读或磁盘 I\/O 错误），请求失败：.*fsck.*" method=POST path=\/api\/admin\/upload/);
  expect(during).not.toMatch(/msg=请求处理失败/);
  expect(occurrences(during, /msg="数据目录无法写入[^\n]*path=\/api\/admin\/upload /)).toBe(1); // once per failed request
  expect(occurrences(during, /msg=变体缓存无法写入/)).toBe(1);
  expect(during).toMatch(/msg=后台任务执行失败 loop=activity_flush_seconds err="disk I\/O error"/);
  for (const loop of new Set([...during.matchAll(/msg=后台任务执行失败 loop=(\S+)/g)].map((m) => m[1]!))) {
    expect({ loop, lines: occurrences(during, new RegExp(`msg=后台任务执行失败 loop=${loop} `)) }).toEqual({ loop, lines: 1 });
  }

  expect(await server.stop()).toBe(1);
  const stop = server.logs.slice(mark);
  expect(stop).toMatch(/level=ERROR msg=关闭时保存访问计数失败，最近的访问次数未能保存/);
  expect(stop).toMatch(/msg=已关闭，但有数据未能写入（见上方错误）/);
  expect(stop).not.toMatch(/SQLiteError|^\s+at /m);

  disk.repair();
  server = await KuraServer.start({ dataDir });
  admin = new Session(server);
  expect((await admin.login("admin", "admin-password-1")).status).toBe(200);
  const again = await fetch(server.url(`/i/${stored.id}`));
  expect([again.status, sha256(await again.arrayBuffer())]).toEqual([200, sha256(png)]);
  const list = await admin.json<{ items: { file_name: string }[] }>("GET", "/api/admin/images");
  expect(list.items.map((i) => i.file_name)).toEqual(["kept.png"]);
  expect((await admin.request("POST", "/api/admin/upload", form(await makePng(40, 30, 9), "after.png"))).status).toBe(200);
}, 90_000);

test("a password reset beside the running service survives the disk going read-only right after it", async () => {
  const second = mountFailableExt4(64);
  const dir = join(second.dir, "data");
  mkdirSync(dir);
  let running = await KuraServer.start({ dataDir: dir });
  try {
    await adminSession(running);
    const reset = await runCli(["reset-password"], { KURA_DATA_DIR: dir });
    expect(reset.code, reset.err).toBe(0);
    const password = /user=admin password=(\S+)/.exec(reset.err)![1]!;
    second.fail(); // what the command committed but did not sync is lost here
    await running.stop("SIGKILL");
    second.repair();
    running = await KuraServer.start({ dataDir: dir });
    expect((await new Session(running).login("admin", password)).status).toBe(200);
  } finally {
    await running.stop("SIGKILL");
    second.unmount();
  }
}, 90_000);
