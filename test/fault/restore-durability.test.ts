/**
 * Fault tier: a restore that was reported done survives the disk failing right after it. The
 * staged snapshot is a whole database that the next start swaps in; written without fsync, ext4
 * (delayed allocation) can bring it back empty or not at all after the fault, while the command or
 * the console had already said "暂存" and the operator had moved on. Real ext4, made to fail by its
 * own trigger (harness.ts), repaired with fsck as an operator would.
 */
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { form, makePng } from "../helpers/images";
import { KuraServer, runCli } from "../helpers/server";
import { useTempDirs } from "../helpers/temp-dirs";
import { kuraOnFailableDisk, type mountFailableExt4 } from "./harness";

const tempDir = useTempDirs();
const disks: ReturnType<typeof mountFailableExt4>[] = [];
afterAll(() => {
  for (const disk of disks) disk.unmount();
});

/** A running server on a failable disk with one image in a snapshot and one uploaded after it. */
async function libraryWithSnapshot() {
  const { disk, dataDir, server, admin } = await kuraOnFailableDisk(disks);
  const before = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(await makePng(60, 40, 1), "before.png"));
  const snap = await admin.json<{ name: string }>("POST", "/api/admin/backups", undefined, 201);
  const after = await admin.json<{ id: string }>("POST", "/api/admin/upload", form(await makePng(60, 40, 2), "after.png"));
  return { disk, dataDir, server, admin, snap, before, after };
}

async function expectRestored(server: KuraServer, ids: { before: { id: string }; after: { id: string } }) {
  expect(server.logs).not.toMatch(/暂存的快照无法换入/);
  expect((await fetch(server.url(`/i/${ids.before.id}`))).status).toBe(200);
  expect((await fetch(server.url(`/i/${ids.after.id}`))).status).toBe(404);
}

/** The disk fails right after a restore was reported staged; after the operator's repair (fsck) the start swaps it in. */
async function failThenExpectRestored(lib: Awaited<ReturnType<typeof libraryWithSnapshot>>) {
  lib.disk.fail();
  await lib.server.stop("SIGKILL");
  lib.disk.repair();
  const restarted = await KuraServer.start({ dataDir: lib.dataDir });
  try {
    await restarted.waitForLog(/已换入快照/);
    await expectRestored(restarted, lib);
  } finally {
    await restarted.stop("SIGKILL");
  }
}

test("a snapshot staged by `kura restore` is still there, whole, after the disk fails right after the command", async () => {
  const lib = await libraryWithSnapshot();
  const file = join(tempDir("kura-snapfile-"), lib.snap.name);
  await Bun.write(file, await (await lib.admin.request("GET", `/api/admin/backups/${lib.snap.name}`)).arrayBuffer());
  const staged = await runCli(["restore", file], { KURA_DATA_DIR: lib.dataDir });
  expect(staged.code, staged.err).toBe(0);
  await failThenExpectRestored(lib);
}, 90_000);

test("a restore accepted by the console (the service stops) is still staged after the disk fails right after it", async () => {
  const lib = await libraryWithSnapshot();
  const accepted = await lib.admin.request("POST", `/api/admin/backups/${lib.snap.name}/restore`);
  expect(accepted.status).toBe(200);
  await failThenExpectRestored(lib);
}, 90_000);

test("the swap at start holds: the restored database is the one in use after the disk fails once the service answers", async () => {
  const lib = await libraryWithSnapshot();
  const file = join(tempDir("kura-snapfile-"), lib.snap.name);
  await Bun.write(file, await (await lib.admin.request("GET", `/api/admin/backups/${lib.snap.name}`)).arrayBuffer());
  await lib.server.stop();
  expect((await runCli(["restore", file], { KURA_DATA_DIR: lib.dataDir })).code).toBe(0);
  const swapped = await KuraServer.start({ dataDir: lib.dataDir });
  await swapped.waitForLog(/已换入快照/);
  lib.disk.fail();
  await swapped.stop("SIGKILL");
  lib.disk.repair();
  const restarted = await KuraServer.start({ dataDir: lib.dataDir });
  try {
    expect(restarted.logs).not.toMatch(/已换入快照|暂存的快照无法换入/);
    await expectRestored(restarted, lib);
  } finally {
    await restarted.stop("SIGKILL");
  }
}, 90_000);
