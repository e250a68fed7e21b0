import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminSession } from "../helpers/client";
import { form, makeJpeg } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import { waitReplicaState } from "../http/channels.helpers";

/** Runs real rclone with only the downloaded config (AWS_CA_BUNDLE breaks rclone 1.60 remotes here). */
async function rclone(conf: string, ...args: string[]) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("RCLONE_") && !k.startsWith("AWS_")) env[k] = v;
  const proc = Bun.spawn(["rclone", "--config", conf, ...args], { env, stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text()]);
  if ((await proc.exited) !== 0) throw new Error(`rclone ${args.join(" ")} failed: ${err}`);
  return new Uint8Array(out);
}

test("a user recovers an image from an encrypted channel with stock rclone and the downloaded config", async () => {
  const server = await KuraServer.start();
  const dir = mkdtempSync(join(tmpdir(), "kura-vault-"));
  try {
    const admin = await adminSession(server);
    const bytes = await makeJpeg(80, 60, 12);
    const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, "keep.jpg", { exif_policy: "passthrough" }));
    const vault = await admin.json("POST", "/api/admin/channels", { name: "vault", driver: "local", config: { path: dir }, encrypted: true }, 201);
    await waitReplicaState(admin, id, vault.id, "done");

    const res = await admin.request("GET", `/api/admin/channels/${vault.id}/rclone-config`);
    expect(res.status).toBe(200);
    const conf = join(dir, "..", `kura-${vault.id}-${Date.now()}.conf`);
    writeFileSync(conf, await res.text(), { mode: 0o600 });
    const listing = new TextDecoder().decode(await rclone(conf, "lsf", "-R", "--files-only", `kura-${vault.id}-crypt:`));
    const key = listing.split("\n").find((l) => l.startsWith("img/"))!;
    expect(key).toMatch(/^img\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}-[0-9a-f]{8}\.jpg$/);
    const recovered = await rclone(conf, "cat", `kura-${vault.id}-crypt:${key}`);
    expect(Buffer.from(recovered).equals(bytes)).toBe(true);
    rmSync(conf);
  } finally {
    await server.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
});
