/**
 * A local channel's directory that is gone (most often a disk that is not mounted) is reported, not
 * made again: recreating it put the images on the system disk under the mount point, where they were
 * hidden once the disk came back (and CI caught replication recreating a test's removed directory).
 * Setting the channel up or testing it still creates a directory that does not exist yet.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { waitReplicaState } from "./channels.helpers";

const { admin } = useAdmin();

test("a vanished directory makes the channel unhealthy and is never recreated by checks, uploads or replication; set up, one is made", async () => {
  const parent = mkdtempSync(join(tmpdir(), "kura-local-root-"));
  try {
    // Set up with a directory that does not exist yet: made, as a person creating the channel expects.
    const dir = join(parent, "mnt", "images");
    const ch = await admin.json("POST", "/api/admin/channels", { name: "usb", driver: "local", config: { path: dir }, priority: 1000 }, 201);
    expect(existsSync(dir)).toBe(true);
    const first = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 1), "a.jpg"));
    await waitReplicaState(admin, first.id, ch.id, "done");

    // The disk goes away (unmounted): the mount point's directory is gone.
    renameSync(dir, `${dir}.unmounted`);
    const checked = await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    expect(checked.healthy).toBe(false);
    expect(checked.last_error).toContain("本地存储目录不可用：目录不存在（磁盘未挂载？");
    // The directory is the channel's configuration: never named (spec 6.3).
    expect(checked.last_error).not.toContain(dir);
    expect(checked.last_error).not.toContain(parent);
    // Uploads go elsewhere, and the replication meant for it does not make the directory either.
    const second = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 2), "b.jpg"));
    expect((await fetch(`${admin.server.base}/i/${second.id}`)).status).toBe(200);
    await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    await Bun.sleep(300);
    expect(existsSync(dir)).toBe(false);

    // Mounted again: healthy at the next check, with what it held.
    renameSync(`${dir}.unmounted`, dir);
    const back = await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    expect({ healthy: back.healthy, last_error: back.last_error }).toEqual({ healthy: true, last_error: "" });
    await waitReplicaState(admin, second.id, ch.id, "done");
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
}, 60_000);
