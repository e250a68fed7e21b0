/**
 * A driver replaced by a config change, or left by a removed channel, is closed once the requests
 * that may still hold it had their time (memory audit L1): an SFTP driver kept its SSH connection
 * for the life of the process, one more for every change. A reconciliation listing holds its driver
 * for as long as it takes, which may be longer than that grace: closed only once it ends (an SFTP
 * listing went on by reconnecting on the closed driver, and nothing closed that connection again).
 * In process, the grace shortened.
 */
import { expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { deleteChannel } from "../../src/channels/drain";
import { reconcileChannel } from "../../src/channels/reconcile";
import type { Driver } from "../../src/channels/driver";
import { createChannel, updateChannel } from "../../src/channels/service";
import type { AppContext } from "../../src/context";
import type { UserRow } from "../../src/users/repo";
import { serviceContextPerTest } from "./harness";

let app: AppContext;
let admin: UserRow;
let dataDir: string;
serviceContextPerTest((ctx) => {
  ({ app, admin, dataDir } = ctx);
  app.channels.retiredDriverGraceMs = 50;
});

/** Counts close() calls on the channel's current driver. */
function watchClose(channelId: number): { closes: number } {
  const driver = app.channels.get(channelId)!.driver as Driver;
  const seen = { closes: 0 };
  driver.close = async () => {
    seen.closes++;
  };
  return seen;
}

test("a config change closes the old driver after the grace, not before; a change without a new config keeps it open", async () => {
  const dirs = ["a", "b"].map((d) => join(dataDir, d));
  for (const d of dirs) mkdirSync(d);
  const created = await createChannel(app, admin, { name: "two", driver: "local", config: { path: dirs[0]! }, priority: 1 });
  const row = () => app.channels.repo.byId(created.id)!;

  const first = watchClose(created.id);
  // A new priority only: the same driver stays, nothing is closed.
  await updateChannel(app, admin, row(), { name: "two", priority: 2, allow_direct_link: false, driver: "local", config: { path: dirs[0]! } });
  await Bun.sleep(150);
  expect(first.closes).toBe(0);

  // A new path: a new driver; the old one is closed after the grace.
  await updateChannel(app, admin, row(), { name: "two", priority: 2, allow_direct_link: false, driver: "local", config: { path: dirs[1]! } });
  expect(first.closes).toBe(0);
  await Bun.sleep(150);
  expect(first.closes).toBe(1);

  // Removed without purge: its driver is closed too.
  const second = watchClose(created.id);
  deleteChannel(app, { id: admin.id, name: admin.name }, created.id, false);
  await Bun.sleep(150);
  expect(second.closes).toBe(1);
});

test("a driver retired while a reconciliation lists through it is closed when the listing ends, not at the end of its grace", async () => {
  const dirs = ["c", "d"].map((d) => join(dataDir, d));
  for (const d of dirs) mkdirSync(d);
  const created = await createChannel(app, admin, { name: "listed", driver: "local", config: { path: dirs[0]! }, priority: 1 });
  const seen = watchClose(created.id);
  // The real listing, started only once the test lets it go on: a listing that takes longer than the grace.
  const driver = app.channels.get(created.id)!.driver as Driver;
  const list = driver.list.bind(driver);
  let goOn = () => {};
  const gate = new Promise<void>((resolve) => {
    goOn = resolve;
  });
  let listing = false;
  driver.list = async function* (prefix: string) {
    listing = true;
    await gate;
    yield* list(prefix);
  };

  const reconciled = reconcileChannel(app, app.channels.get(created.id)!);
  while (!listing) await Bun.sleep(5);
  const row = app.channels.repo.byId(created.id)!;
  await updateChannel(app, admin, row, { name: "listed", priority: 1, allow_direct_link: false, driver: "local", config: { path: dirs[1]! } });
  await Bun.sleep(150);
  expect(seen.closes).toBe(0);

  goOn();
  await reconciled;
  expect(seen.closes).toBe(1);
});
