import type { AppContext } from "../../context";
import { BackupFailedError, listSnapshots, openSnapshot, SNAPSHOT_NAME, stageSnapshot, stagedPath, takeSnapshot } from "../../ops/backups";
import { audit } from "../../ops/audit";
import { ApiError, notFound } from "../errors";
import { sessionRoutes } from "../guard";

/** Time for the restore response to reach the client before the server stops accepting. */
const RESTORE_SHUTDOWN_DELAY_MS = 200;

const snapshotMissing = () => notFound("没有健康的存储渠道持有该快照");

function checkedName(name: string): string {
  if (!SNAPSHOT_NAME.test(name)) throw snapshotMissing();
  return name;
}

/** Metadata backups (spec 4.11): list, take now, download, restore. */
export function backupRoutes(app: AppContext) {
  return sessionRoutes(app, "admin")
    .get("/api/admin/backups", async () => {
      const items = await listSnapshots(app);
      return { items, total: items.length };
    })
    .post("/api/admin/backups", async ({ set, principal: p }) => {
      try {
        const item = await takeSnapshot(app);
        audit(app.db, p.user, "backup.create", item.name, { channels: item.channels });
        set.status = 201;
        return item;
      } catch (err) {
        if (err instanceof BackupFailedError) throw new ApiError(503, err.message, err.diskFull ? { "retry-after": "60" } : {});
        throw err;
      }
    })
    .get("/api/admin/backups/:name", async ({ params, principal: p }) => {
      const name = checkedName(params.name);
      const opened = await openSnapshot(app, name);
      if (!opened) throw snapshotMissing();
      // The whole database leaves the server: token and session hashes, sealed channel credentials.
      audit(app.db, p.user, "backup.download", name);
      return new Response(opened.file ?? opened.stream, {
        headers: {
          "content-type": "application/vnd.sqlite3",
          "content-length": String(opened.size),
          "content-disposition": `attachment; filename="${name}"`,
          "cache-control": "no-store",
        },
      });
    })
    .post("/api/admin/backups/:name/restore", async ({ params, principal: p }) => {
      const name = checkedName(params.name);
      if (!(await stageSnapshot(app, name))) throw snapshotMissing();
      // Kept in the database the swap sets aside (kura.db.before-restore-…); the log line names who asked too.
      audit(app.db, p.user, "backup.restore", name);
      // Shut down only after this response has been sent; the swap happens at the next start.
      setTimeout(() => {
        app.log.info("收到恢复请求，正在关闭", { snapshot: name, user: p.user.name });
        app.shutdown("restore");
      }, RESTORE_SHUTDOWN_DELAY_MS);
      return {
        snapshot: name,
        staged: stagedPath(app.bootstrap.dataDir),
        message: "快照已暂存，服务正在关闭；重新启动后将换入该快照",
      };
    });
}
