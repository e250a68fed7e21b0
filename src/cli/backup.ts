import type { Bootstrap } from "../config/bootstrap";
import { BackupFailedError, takeSnapshot } from "../ops/backups";
import { openForMaintenance } from "./maintenance";

/** `kura backup`: one metadata snapshot now, to every healthy channel (the service must be stopped). */
export async function backupNow(boot: Bootstrap): Promise<number> {
  const app = await openForMaintenance(boot, "backup");
  if (typeof app === "number") return app;
  try {
    // Health as last recorded may be stale after downtime: probe first, like the service's first round.
    for (const channel of app.channels.list()) if (!channel.row.deleting) await app.channels.probe(channel.row.id);
    const snapshot = await takeSnapshot(app);
    console.log(`已写入快照 ${snapshot.name}（${snapshot.size} 字节）到存储渠道：${snapshot.channels.join("、")}`);
    return 0;
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
