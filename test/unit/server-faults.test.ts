/**
 * The server's temporary conditions (src/ops/server-faults.ts) as each surface answers them: a full
 * disk, the descriptor limit and a database locked by another process, recognised from the errors
 * their sources really throw (Node's fs, bun:sqlite) also when a driver wraps them as a cause, and
 * nothing else taken for one. The faults themselves, for real, are in test/fault/.
 */
import { loggedRequestId } from "../../src/ops/request-trace";
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Invalid } from "../../src/errors";
import { logServerFault, serverFaultOf, watchServerFaults } from "../../src/ops/server-faults";
import { toS3Error } from "../../src/s3/errors";

/** What bun:sqlite throws when another connection holds the write lock past the busy timeout. */
function databaseLockedError(): unknown {
  const dir = mkdtempSync(join(tmpdir(), "kura-locked-"));
  const holder = new Database(join(dir, "x.db"));
  const other = new Database(join(dir, "x.db"));
  try {
    holder.run("PRAGMA journal_mode = WAL");
    holder.run("CREATE TABLE t (x)");
    other.run("PRAGMA busy_timeout = 10");
    holder.run("BEGIN IMMEDIATE");
    other.run("INSERT INTO t VALUES (1)");
    return undefined;
  } catch (err) {
    return err;
  } finally {
    holder.close();
    other.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
const fsError = (code: string) => Object.assign(new Error(`${code}: failed, open '/srv/kura/tmp/x'`), { code, errno: -1, syscall: "open" });

describe("serverFaultOf", () => {
  test("a locked database, as bun:sqlite throws it, is a 503 with Retry-After 5", () => {
    const locked = databaseLockedError();
    expect((locked as { code?: string }).code).toBe("SQLITE_BUSY");
    expect(serverFaultOf(locked)).toMatchObject({ message: "服务器数据库暂时被占用，请稍后重试", headers: { "retry-after": "5" } });
  });

  test("each kind by its code, its message, or as the cause of a driver's Chinese error", () => {
    const answers = (err: unknown) => serverFaultOf(err)?.message;
    expect(answers(fsError("ENOSPC"))).toBe("服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员");
    expect(answers(fsError("EDQUOT"))).toBe("服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员");
    expect(answers(new Error("database or disk is full"))).toBe("服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员");
    expect(answers(fsError("EMFILE"))).toBe("服务器同时打开的文件已达上限，暂时无法处理，请稍后重试");
    expect(answers(fsError("ENFILE"))).toBe("服务器同时打开的文件已达上限，暂时无法处理，请稍后重试");
    expect(answers(new Error("本地存储写入失败", { cause: fsError("EMFILE") }))).toBe("服务器同时打开的文件已达上限，暂时无法处理，请稍后重试");
    expect(answers(new Error("与存储服务通信失败", { cause: databaseLockedError() }))).toBe("服务器数据库暂时被占用，请稍后重试");
    expect(serverFaultOf(fsError("ENOSPC"))?.headers).toEqual({ "retry-after": "60" });
  });

  test("storage refusing writes (read-only, I/O errors) by its code, its message or as a cause: a 503 with Retry-After 300", () => {
    const STORAGE = "服务器存储发生故障，暂时无法写入，请稍后重试或联系管理员";
    const dir = mkdtempSync(join(tmpdir(), "kura-readonly-"));
    let readOnly: unknown;
    try {
      new Database(join(dir, "x.db")).run("CREATE TABLE t (x)");
      readOnly = (() => {
        const db = new Database(join(dir, "x.db"), { readonly: true });
        try {
          db.run("INSERT INTO t VALUES (1)");
        } catch (err) {
          return err;
        } finally {
          db.close();
        }
      })();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect((readOnly as { code?: string }).code).toBe("SQLITE_READONLY");
    const sqlite = (code: string, message: string) => Object.assign(new Error(message), { code });
    for (const err of [
      readOnly,
      fsError("EROFS"),
      fsError("EIO"),
      sqlite("SQLITE_IOERR_WRITE", "disk I/O error"), // what bun:sqlite threw on the remounted ext4 (fault/read-only-disk)
      sqlite("SQLITE_IOERR_FSYNC", "无法写入"), // the code alone, with SQLite's extended suffix
      sqlite("SQLITE_READONLY_DBMOVED", "无法写入"),
      new Error("disk I/O error"), // the message alone
      new Error("attempt to write a readonly database"),
      new Error('VipsForeignSave: unable to write to "/srv/kura/variants/x": Read-only file system'), // libvips
      new Error("EROFS: read-only file system, mkdir '/srv/kura/variants/4c'"),
      new Error("EIO: i/o error, write"),
      new Error("本地存储写入失败", { cause: fsError("EROFS") }),
    ]) {
      expect({ err: String(err), answer: serverFaultOf(err)?.message }).toEqual({ err: String(err), answer: STORAGE });
    }
    expect(serverFaultOf(fsError("EIO"))?.headers).toEqual({ "retry-after": "300" });
    for (const err of [
      sqlite("SQLITE_ERROR", "no such table: t"),
      sqlite("SQLITE_IOERRX", "x"),
      new Error("a disk I/O error counter"),
      new Error("EIOPS limit"),
      new Error("x EROFS"),
    ]) {
      expect({ err: String(err), answer: serverFaultOf(err) }).toEqual({ err: String(err), answer: undefined });
    }
  });

  test("nothing else is one: a missing file, a request's fault, a message that only mentions a lock", async () => {
    const missing = await open("/nonexistent/kura").catch((e: unknown) => e);
    for (const err of [missing, fsError("EACCES"), new Invalid("不支持的图片格式"), new Error("the lock file is locked"), "database is locked", undefined]) {
      expect(serverFaultOf(err)).toBeUndefined();
    }
  });

  test("each kind tells the operator what to change", () => {
    expect([fsError("ENOSPC"), fsError("EMFILE"), databaseLockedError(), fsError("EROFS")].map((err) => serverFaultOf(err)!.log)).toEqual([
      "磁盘空间不足，写入失败",
      "打开的文件过多，请求失败：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）",
      "数据库被锁定（另一个连接长时间持有写锁），请求失败：请检查是否有程序正在写入 kura.db（例如停在事务中的 sqlite3 命令行）",
      "数据目录无法写入（文件系统已变为只读或磁盘 I/O 错误），请求失败：请查看 dmesg 中的磁盘错误，修复文件系统（fsck）并重新挂载为可写后重启 Kura",
    ]);
  });

  test("each answer is a fresh copy: a caller adding a header changes no later answer", () => {
    const first = serverFaultOf(fsError("EMFILE"))!;
    first.headers.connection = "close";
    expect(serverFaultOf(fsError("EMFILE"))!.headers).toEqual({ "retry-after": "5" });
  });
});

describe("the surfaces", () => {
  test("S3 answers each as ServiceUnavailable with the same message and Retry-After", () => {
    for (const [err, retry] of [
      [fsError("ENOSPC"), "60"],
      [fsError("EMFILE"), "5"],
      [databaseLockedError(), "5"],
      [fsError("EROFS"), "300"],
    ] as const) {
      const s3 = toS3Error(err);
      expect([s3.code, s3.status, s3.message, s3.headers["retry-after"]]).toEqual(["ServiceUnavailable", 503, serverFaultOf(err)!.message, retry]);
    }
    expect(toS3Error(fsError("EACCES"))).toMatchObject({ code: "InternalError", status: 500 });
  });

  test("logServerFault tells the fault's watchers (the database lock breaker), and only of faults", () => {
    const seen: unknown[] = [];
    const stop = watchServerFaults((err) => seen.push(err));
    const log = { error: () => {} };
    const request = new Request("http://kura.test/api/upload", { method: "POST" });
    const locked = databaseLockedError();
    try {
      logServerFault(log, request, fsError("EACCES"));
      logServerFault(log, request, locked);
    } finally {
      stop();
    }
    logServerFault(log, request, fsError("EROFS")); // after stop: not told
    expect(seen).toEqual([locked]);
  });

  test("logServerFault writes one ERROR with the method, the path without its query, and the error; nothing for other errors", () => {
    const lines: [string, Record<string, unknown>][] = [];
    const log = { error: (msg: string, fields: Record<string, unknown>) => void lines.push([msg, fields]) };
    const request = new Request("http://kura.test/api/upload?token=secret", { method: "POST" });
    expect(logServerFault(log, request, fsError("EACCES"))).toBeUndefined();
    expect(lines).toEqual([]);
    expect(logServerFault(log, request, databaseLockedError())?.message).toBe("服务器数据库暂时被占用，请稍后重试");
    // The request now has the id its answer will carry.
    expect(loggedRequestId(request)).toMatch(/^[0-9a-f]{16}$/);
    expect(lines).toStrictEqual([
      [
        "数据库被锁定（另一个连接长时间持有写锁），请求失败：请检查是否有程序正在写入 kura.db（例如停在事务中的 sqlite3 命令行）",
        { method: "POST", path: "/api/upload", request_id: loggedRequestId(request), err: "database is locked" },
      ],
    ]);
  });
});
