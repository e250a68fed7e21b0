import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import type { KuraServer } from "../helpers/server";
import { startApacheDav, type ApacheDav } from "../channels/servers/apache";
import { startSshd, type SshServer } from "../channels/servers/sshd";
import { queryDb, waitFor, waitReplicaState } from "./channels.helpers";

const openAlerts = (server: KuraServer, target: string) =>
  queryDb<{ kind: string }>(server, "SELECT kind FROM alerts WHERE target = ? AND resolved_at = ''", target).map((a) => a.kind);

describe("WebDAV and SFTP channels through the API, with their servers going down and back", () => {
  let scratch: string;
  let dav: ApacheDav;
  let sshd: SshServer;
  let firstImage: string;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "kura-davsftp-"));
    dav = await startApacheDav(join(scratch, "apache"), { kura: "dav-secret-1" });
    await dav.start();
    mkdirSync(join(scratch, "sshd"));
    sshd = await startSshd(join(scratch, "sshd"));
    await sshd.start();
  });
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    firstImage = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 30, 1), "before.jpg"))).id;
  });
  afterAll(async () => {
    await dav.stop();
    await sshd.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("WebDAV: created from its template, backfilled, unhealthy while Apache is down, healed after", async () => {
    const ch = await admin.json(
      "POST",
      "/api/admin/channels",
      { template: "webdav", inputs: { url: dav.url, user: "kura", pass: "dav-secret-1", path: "kura" }, name: "dav" },
      201,
    );
    await waitReplicaState(admin, firstImage, ch.id, "done");
    expect(listFiles(dav.davDir).some((f) => f.startsWith("kura/img/"))).toBe(true);
    const view = await admin.json("GET", `/api/admin/channels/${ch.id}/config`);
    expect(view.config.pass).toBe("__kura_secret_keep__");
    // rclone declares WebDAV's `user` sensitive (an account name, spec 4.7 rule 5): masked, and only "set" in the audit.
    expect(view.config.user).toBe("__kura_secret_keep__");
    expect(view.inputs?.user ?? "__kura_secret_keep__").toBe("__kura_secret_keep__");
    const created = (await admin.json("GET", `/api/admin/audit?action=channel.create&target=${ch.id}`)).items[0].detail as string;
    expect(created).not.toContain('"user":"kura"');
    expect(created).toContain('"user":"set"');

    await dav.stop();
    const down = await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    expect(down.healthy).toBe(false);
    expect(down.last_error).not.toContain("dav-secret-1");
    expect(openAlerts(server, "dav")).toContain("channel_unhealthy");
    const during = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(31, 31, 2), "during.jpg"))).id;
    await waitReplicaState(admin, during, ch.id, "failed");

    await dav.start();
    expect((await admin.json("POST", `/api/admin/channels/${ch.id}/check`)).healthy).toBe(true);
    await waitReplicaState(admin, during, ch.id, "done");
    expect(openAlerts(server, "dav")).not.toContain("channel_unhealthy");
  });

  test("SFTP: the periodic health loop alone notices the outage and the recovery", async () => {
    const ch = await admin.json(
      "POST",
      "/api/admin/channels",
      {
        template: "sftp",
        inputs: { host: "127.0.0.1", port: String(sshd.port), user: sshd.user, key_pem: sshd.clientKey, path: join(scratch, "sftp-root") },
        name: "sftp",
      },
      201,
    );
    await waitReplicaState(admin, firstImage, ch.id, "done");
    expect(listFiles(join(scratch, "sftp-root")).some((f) => f.startsWith("img/"))).toBe(true);
    // Host and account name are sensitive in rclone's sftp backend: masked like the key.
    const view = await admin.json("GET", `/api/admin/channels/${ch.id}/config`);
    expect([view.config.host, view.config.user, view.config.key_pem]).toEqual(["__kura_secret_keep__", "__kura_secret_keep__", "__kura_secret_keep__"]);
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 1 });

    await sshd.stop();
    sshd.dropConnections();
    const unhealthy = await waitFor(
      () => admin.json("GET", "/api/admin/channels"),
      (l) => l.items.find((c: { name: string }) => c.name === "sftp")?.healthy === false,
      15_000,
      "sftp unhealthy",
    );
    expect(unhealthy.items.find((c: { name: string }) => c.name === "sftp").last_error).not.toBe("");
    await waitFor(
      async () => openAlerts(server, "sftp"),
      (kinds) => kinds.includes("channel_unhealthy"),
      10_000,
      "alert",
    );
    await server.waitForLog(/msg=告警已触发 kind=channel_unhealthy target=sftp/);

    await sshd.start();
    await waitFor(
      () => admin.json("GET", "/api/admin/channels"),
      (l) => l.items.find((c: { name: string }) => c.name === "sftp")?.healthy === true,
      15_000,
      "sftp healthy",
    );
    await waitFor(
      async () => openAlerts(server, "sftp"),
      (kinds) => !kinds.includes("channel_unhealthy"),
      10_000,
      "alert resolved",
    );
    await server.waitForLog(/msg=告警已解除 kind=channel_unhealthy target=sftp/);
    await admin.json("PUT", "/api/admin/config", { health_check_seconds: 60 });
  });
});
