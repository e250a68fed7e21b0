/**
 * kura_channel_puts_total is labelled by channel name: the series of a name no channel has any
 * more (renamed, deleted) go from /metrics instead of staying for the life of the process
 * (memory audit L2).
 */
import { expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";

const { server, admin } = useAdmin();
const metrics = async () => (await fetch(server.url("/metrics"))).text();

test("renaming and deleting a channel drop its put series; the others stay", async () => {
  const dir = join(server.dataDir, "fast");
  mkdirSync(dir);
  // The best channel, so the upload's synchronous put goes there.
  const { id } = await admin.json<{ id: number }>("POST", "/api/admin/channels", { name: "fast", driver: "local", config: { path: dir }, priority: 1000 }, 201);
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 61), "a.jpg"));
  expect(await metrics()).toMatch(/kura_channel_puts_total\{channel="fast",result="ok"\} 1/);

  const view = await admin.json("GET", `/api/admin/channels/${id}/config`);
  await admin.json("PUT", `/api/admin/channels/${id}`, { name: "renamed", priority: 1000, allow_direct_link: false, driver: "local", config: view.config });
  await admin.json("POST", "/api/admin/upload", form(await makeJpeg(20, 20, 62), "b.jpg"));
  let text = await metrics();
  expect(text).not.toContain('kura_channel_puts_total{channel="fast"');
  expect(text).toMatch(/kura_channel_puts_total\{channel="renamed",result="ok"\} 1/);

  // Refused (409) while it holds the only copy of an image: the copies to the built-in channel come first.
  const deadline = Date.now() + 20_000;
  while ((await admin.request("DELETE", `/api/admin/channels/${id}?purge=false`)).status !== 204) {
    if (Date.now() > deadline) throw new Error("the channel could not be deleted");
    await Bun.sleep(50);
  }
  text = await metrics();
  expect(text).not.toContain('kura_channel_puts_total{channel="renamed"');
  // The built-in channel's series (replication wrote both images there) is untouched.
  expect(text).toMatch(/kura_channel_puts_total\{channel="local",result="ok"\} [1-9]/);
});
