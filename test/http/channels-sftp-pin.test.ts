/**
 * SFTP host keys pinned on first use (audit 3 M2; README "SFTP host keys"), through the admin API against a
 * programmable ssh2 server whose host key the test swaps on the same port, as an impostor would.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { obscure } from "../../src/channels/rclone/obscure";
import { useAdmin } from "../helpers/fixture";
import { type SftpPeer, startSftpPeer } from "../channels/servers/sftp-peer";

const scratch = await mkdtemp(join(tmpdir(), "kura-sftp-pin-"));
const peers: SftpPeer[] = [];
async function peer(name: string): Promise<SftpPeer> {
  await mkdir(join(scratch, name));
  const p = await startSftpPeer(join(scratch, name));
  peers.push(p);
  return p;
}
const a = await peer("a");
const b = await peer("b");
afterAll(async () => {
  for (const p of peers) await p.stop();
  await rm(scratch, { recursive: true, force: true });
});

const { admin } = useAdmin();
// Each channel its own path: two channels at one server and path are refused (one place, two "copies").
const sftpConfig = (p: SftpPeer, extra: Record<string, string> = {}) => ({
  host: "127.0.0.1",
  port: String(p.port),
  user: "kura",
  pass: obscure(p.password),
  ...extra,
});
const configOf = async (id: number) => (await admin.json("GET", `/api/admin/channels/${id}/config`)).config as Record<string, string>;
const put = (id: number, name: string, config: Record<string, string>, status = 200) =>
  admin.json("PUT", `/api/admin/channels/${id}`, { name, priority: 0, allow_direct_link: false, driver: "sftp", config }, status);

describe("SFTP host key pinned on first use", () => {
  test("create records the key; another key on the same port is refused before any authentication", async () => {
    const ch = await admin.json("POST", "/api/admin/channels", { name: "pin-a", driver: "sftp", config: sftpConfig(a, { path: "pin-a" }) }, 201);
    const pinned = a.fingerprint();
    // Shown in clear (a public fingerprint) for comparison with ssh-keygen -lf.
    expect((await configOf(ch.id)).host_key_sha256).toBe(pinned);
    expect((await admin.json("POST", `/api/admin/channels/${ch.id}/check`)).healthy).toBe(true);

    await a.replaceHostKey();
    const attempts = a.stats.authAttempts;
    const passwords = a.stats.passwordsOffered;
    const checked = await admin.json("POST", `/api/admin/channels/${ch.id}/check`);
    expect(checked.healthy).toBe(false);
    expect(checked.last_error).toContain("主机密钥与记录的指纹不一致，已拒绝连接，未发送密码或私钥");
    // The server's key is named for comparison; the pin is configuration and is not (spec 6.3).
    expect(checked.last_error).toContain(`服务器提供的 ${a.fingerprint()}，与 host_key_sha256 不符`);
    expect(checked.last_error).not.toContain(pinned);
    expect(a.stats.authAttempts).toBe(attempts);
    expect(a.stats.passwordsOffered).toBe(passwords);
    // The stored pin is not replaced by the key that was refused.
    expect((await configOf(ch.id)).host_key_sha256).toBe(pinned);

    // A save that keeps the pin is probed against it, and refused the same way.
    const refused = await admin.json(
      "PUT",
      `/api/admin/channels/${ch.id}`,
      { name: "pin-a", priority: 1, allow_direct_link: false, driver: "sftp", config: { ...(await configOf(ch.id)), path: "moved" } },
      400,
    );
    expect(JSON.stringify(refused)).toContain("主机密钥与记录的指纹不一致");
    expect(a.stats.authAttempts).toBe(attempts);

    // Clearing the pin (after the admin confirmed the change) re-pins on save.
    await put(ch.id, "pin-a", { ...(await configOf(ch.id)), host_key_sha256: "" });
    expect((await configOf(ch.id)).host_key_sha256).toBe(a.fingerprint());
    expect((await admin.json("POST", `/api/admin/channels/${ch.id}/check`)).healthy).toBe(true);
  });

  test("PUT with another port drops the old pin and records the new server's key", async () => {
    const ch = await admin.json("POST", "/api/admin/channels", { name: "pin-move", driver: "sftp", config: sftpConfig(a, { path: "pin-move" }) }, 201);
    const before = await configOf(ch.id);
    expect(before.host_key_sha256).toBe(a.fingerprint());
    await put(ch.id, "pin-move", { ...before, port: String(b.port), pass: obscure(b.password) });
    const after = await configOf(ch.id);
    expect(after.port).toBe(String(b.port));
    expect(after.host_key_sha256).toBe(b.fingerprint());
    expect(b.fingerprint()).not.toBe(a.fingerprint());
  });

  test("a pin typed in for the new address is kept and checked; a malformed one is refused", async () => {
    const wrong = a.fingerprint();
    const body = { name: "pin-typed", driver: "sftp", config: sftpConfig(b, { host_key_sha256: wrong, path: "pin-typed" }) };
    const err = await admin.json("POST", "/api/admin/channels", body, 400);
    expect(JSON.stringify(err)).toContain(`服务器提供的 ${b.fingerprint()}，与 host_key_sha256 不符`);
    expect(JSON.stringify(err)).not.toContain(wrong);
    const bad = await admin.json(
      "POST",
      "/api/admin/channels",
      { ...body, config: sftpConfig(b, { host_key_sha256: "SHA256:short", path: "pin-typed" }) },
      400,
    );
    expect(JSON.stringify(bad)).toContain("host_key_sha256 无效");
    const ok = await admin.json(
      "POST",
      "/api/admin/channels",
      { ...body, config: sftpConfig(b, { host_key_sha256: b.fingerprint(), path: "pin-typed" }) },
      201,
    );
    expect((await configOf(ok.id)).host_key_sha256).toBe(b.fingerprint());
  });

  test("known_hosts_file = none opts out: nothing is recorded", async () => {
    const ch = await admin.json(
      "POST",
      "/api/admin/channels",
      { name: "pin-none", driver: "sftp", config: sftpConfig(b, { known_hosts_file: "none", path: "pin-none" }) },
      201,
    );
    expect((await configOf(ch.id)).host_key_sha256).toBeUndefined();
  });
});
