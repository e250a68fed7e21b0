import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { createChannel, requireChannel, testChannel, updateChannel } from "../../src/channels/service";
import { Conflict, Invalid, NotFound } from "../../src/errors";
import type { UserRow } from "../../src/users/repo";
import { serviceContext, thrown } from "./harness";

describe("channel service, in process", () => {
  let app: AppContext;
  let admin: UserRow;
  let dataDir: string;
  let dispose: () => void;
  beforeAll(async () => ({ app, admin, dataDir, dispose } = await serviceContext()));
  afterAll(() => dispose());

  test("create probes a local channel, saves it healthy, and audits it", async () => {
    const dir = mkdtempSync(join(dataDir, "disk-"));
    const created = await createChannel(app, admin, { name: "disk-two", driver: "local", config: { path: dir }, priority: 5 });
    expect(created).toMatchObject({ name: "disk-two", driver: "local", priority: 5 });
    const row = requireChannel(app, created.id);
    expect(row.name).toBe("disk-two");
    expect(app.channels.get(row.id)?.healthy).toBe(true);
    const audited = app.db.query<{ action: string }, []>("SELECT action FROM audit WHERE action = 'channel.create'").all();
    expect(audited.length).toBe(1);
  });

  test("a duplicate name is a Conflict; an unknown id is NotFound", async () => {
    const dir = mkdtempSync(join(dataDir, "disk-"));
    expect(await thrown(() => createChannel(app, admin, { name: "disk-two", driver: "local", config: { path: dir } }))).toBeInstanceOf(Conflict);
    expect(await thrown(() => requireChannel(app, 987_654))).toBeInstanceOf(NotFound);
    expect(await thrown(() => requireChannel(app, undefined))).toBeInstanceOf(NotFound);
  });

  test("invalid combinations are Invalid, and nothing is saved", async () => {
    const before = app.channels.repo.all().length;
    const encryptedDirect = await thrown(() =>
      createChannel(app, admin, { name: "bad", driver: "local", config: { path: dataDir }, encrypted: true, allow_direct_link: true }),
    );
    expect(encryptedDirect).toBeInstanceOf(Invalid);
    expect((encryptedDirect as Error).message).toMatch(/[\u4e00-\u9fff]/);
    expect(await thrown(() => createChannel(app, admin, { name: "bad2", driver: "no-such-driver", config: {} }))).toBeInstanceOf(Invalid);
    expect(app.channels.repo.all().length).toBe(before);
  });

  test("the encryption of a channel cannot change after creation", async () => {
    const row = app.channels.repo.all().find((r) => r.name === "disk-two")!;
    const change = await thrown(() =>
      updateChannel(app, admin, row, { name: row.name, priority: row.priority, allow_direct_link: false, encrypted: !row.encrypted }),
    );
    expect(change).toBeInstanceOf(Conflict);
  });

  test("test reports a failing probe as a result, not an error", async () => {
    const result = await testChannel(app, admin, { driver: "local", config: { path: "/proc/kura-cannot-write-here" } });
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/^存储渠道探测失败/);
  });
});
