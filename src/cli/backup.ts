import type { Bootstrap } from "../config/bootstrap";
import { BackupFailedError, takeSnapshot } from "../ops/backups";
import { log } from "../ops/log";
import { openForMaintenance } from "./maintenance";

/**
 * `kura backup`: one metadata snapshot now, to every healthy channel (the service must be stopped).
 * A channel left without it (unhealthy, or the write failed) gets a WARN line and the exit code is
 * 1, as the service's own backup opens backup_failed: an off-site copy must not go missing in silence.
 */
export async function backupNow(boot: Bootstrap): Promise<number> {
  const app = await openForMaintenance(boot, "backup");
  if (typeof app === "number") return app;
  try {
    // Health as last recorded may be stale after downtime: probe first, like the service's first round.
    for (const channel of app.channels.list()) if (!channel.row.deleting) await app.channels.probe(channel.row.id);
    const wanted = app.channels.list().filter((c) => !c.row.deleting);
    const unhealthy = wanted.filter((c) => !c.driver || !c.healthy);
    for (const c of unhealthy) log.warn("存储渠道不可用，快照未写入该渠道", { channel: c.row.name, err: c.loadError || c.row.last_error || "不健康" });
    const snapshot = await takeSnapshot(app);
    // Healthy, yet the write failed: the reasons are in the 元数据备份失败 line takeSnapshot logged.
    const failed = wanted.filter((c) => !unhealthy.includes(c) && !snapshot.channels.includes(c.row.name));
    for (const c of failed) log.warn("快照未能写入该渠道（写入失败，原因见元数据备份失败）", { channel: c.row.name });
    const missed = unhealthy.length + failed.length;
    console.log(
      `已写入快照 ${snapshot.name}（${snapshot.size} 字节）到存储渠道：${snapshot.channels.join("、")}${missed ? `；${missed} 个存储渠道未写入` : ""}`,
    );
    return missed ? 1 : 0;
  } catch (err) {
    if (err instanceof BackupFailedError) {
      console.error(`备份失败：${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    app.db.close();
  }
}
