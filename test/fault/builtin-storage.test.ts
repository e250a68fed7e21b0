/**
 * Fault tier: the built-in channel's `storage/` in the data directory is unusable at start (a file
 * where the directory belongs: a botched copy, a mount that left a file behind). A channel that
 * cannot load is skipped, not fatal (spec 3.2): the service starts, serves every image from its
 * other channel, takes uploads there, shows the built-in channel unhealthy with the Chinese reason,
 * and brings it back once the directory is.
 */
import { expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminSession, Session } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { expectUserMessage } from "../helpers/messages";
import { KuraServer } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";
import { waitAllReplicasDone } from "../http/channels.helpers";

const tempDir = useTempDirs();
const PASSWORD = "admin-password-1";

interface ChannelItem {
  id: number;
  name: string;
  healthy: boolean;
  last_error: string;
}

test("storage/ a file at start: the service starts on the other channel and the built-in one recovers when the directory is back", async () => {
  const server = await KuraServer.start({ dataDir: tempDir("kura-builtin-storage-") });
  let restarted: KuraServer | undefined;
  try {
    const admin = await adminSession(server, PASSWORD);
    await admin.json("POST", "/api/admin/channels", { name: "spare", driver: "local", config: { path: tempDir("kura-builtin-spare-") }, priority: 1 }, 201);
    const bytes = await makeJpeg(320, 240, 77);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "kept.jpg", { exif_policy: "passthrough" }));
    await waitAllReplicasDone(admin, id, 2);
    await server.stop();

    const storage = join(server.dataDir, "storage");
    rmSync(storage, { recursive: true });
    writeFileSync(storage, "not a directory");
    restarted = await KuraServer.start({ dataDir: server.dataDir });
    const warned = await restarted.waitForLog(/level=WARN msg=("[^"]*storage[^"]*") path=\S+ err=("[^"]*")/);
    expectUserMessage(warned[1]!);
    expect(warned[2]).toContain("已存在，但不是目录");

    const s = new Session(restarted);
    expect((await s.login("admin", PASSWORD)).status).toBe(200);
    const served = await fetch(restarted.url(`/i/${id}`));
    expect(served.status).toBe(200);
    expect(Buffer.from(await served.arrayBuffer()).equals(bytes)).toBe(true);

    const channels = async () => (await s.json("GET", "/api/admin/channels")).items as ChannelItem[];
    const builtin = (await channels()).find((c) => c.name === "local")!;
    expect(builtin.healthy).toBe(false);
    expect(builtin.last_error).toContain("不是目录");
    expectUserMessage(builtin.last_error);
    const alerts = await s.json("GET", "/api/admin/alerts");
    expect(alerts.items.some((a: { kind: string; target: string }) => a.kind === "channel_unhealthy" && a.target === "local")).toBe(true);

    // Uploads go to the channel that works.
    const fresh = await makeJpeg(200, 150, 78);
    const uploaded = await s.json("POST", "/api/admin/upload", form(fresh, "new.jpg", { exif_policy: "passthrough" }));
    expect(Buffer.from(await (await fetch(restarted.url(`/i/${uploaded.id}`))).arrayBuffer()).equals(fresh)).toBe(true);

    // The directory back, the next check finds the channel healthy again.
    rmSync(storage);
    mkdirSync(storage);
    const checked = await s.json("POST", `/api/admin/channels/${builtin.id}/check`);
    expect({ healthy: checked.healthy, last_error: checked.last_error }).toEqual({ healthy: true, last_error: "" });
  } finally {
    await restarted?.dispose();
    await server.dispose();
  }
}, 60_000);
