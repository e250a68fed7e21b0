/**
 * An SFTP channel saved before host keys were pinned (no `host_key_sha256`, no `known_hosts_file`)
 * gets its pin at its next successful connection (registry.storeHostKey), and from then on refuses
 * another key like a channel pinned on save. The API pins every save itself, so such a channel
 * is written straight into the repository here, as an older version left it.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { obscure } from "../../src/channels/rclone/obscure";
import { checkChannel } from "../../src/channels/service";
import { type SftpPeer, startSftpPeer } from "../channels/servers/sftp-peer";
import { serviceContext } from "./harness";

const scratch = await mkdtemp(join(tmpdir(), "kura-sftp-pin-old-"));
await mkdir(join(scratch, "root"));
const peer: SftpPeer = await startSftpPeer(join(scratch, "root"));
const { app, dispose } = await serviceContext();
afterAll(async () => {
  dispose();
  await peer.stop();
  await rm(scratch, { recursive: true, force: true });
});

test("a channel saved without a pin is pinned at its next connection, then refuses another key", async () => {
  const config = { host: "127.0.0.1", port: String(peer.port), user: "kura", pass: obscure(peer.password) };
  const id = app.channels.repo.insert({ name: "old-sftp", driver: "sftp", secrets: { config }, healthy: true });
  app.channels.reload();
  const pinned = () => app.channels.repo.secrets(app.channels.repo.byId(id)!).config.host_key_sha256;
  expect(pinned()).toBeUndefined();

  expect((await checkChannel(app, id)).healthy).toBe(true);
  expect(pinned()).toBe(peer.fingerprint());

  await peer.replaceHostKey();
  const passwords = peer.stats.passwordsOffered;
  const checked = await checkChannel(app, id);
  expect(checked.healthy).toBe(false);
  expect(checked.last_error).toContain("主机密钥与记录的指纹不一致");
  expect(peer.stats.passwordsOffered).toBe(passwords);
});
