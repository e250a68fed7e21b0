/**
 * The one answer of `/i/` that no HTTP test reaches: its image row cannot be read (the metadata
 * database failing under it). The client gets a 500 in Chinese that says nothing of the cause,
 * the log gets the cause once, and the image's bytes are not touched. In-process over the real
 * context, with the real lookup failing on a table the database no longer has.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AppContext } from "../../src/context";
import { serveImage } from "../../src/delivery/serve-image";
import type { ImageView } from "../../src/images/repo";
import { type CapturedLog, openContext } from "../helpers/context";
import { makeJpeg } from "../helpers/images";
import { uploadBytes } from "./harness";

let app: AppContext;
let logs: CapturedLog[];
let close: () => void;
const dataDir = mkdtempSync(join(tmpdir(), "kura-service-lookup-"));
beforeAll(async () => ({ app, logs, close } = await openContext(dataDir)));
afterAll(() => {
  close();
  rmSync(dataDir, { recursive: true, force: true });
});

test("a failed image lookup answers 500 in Chinese without the cause, and logs the cause", async () => {
  const { id } = await uploadBytes(app, app.users.byName("admin")!.id, await makeJpeg(40, 30, 5));
  /** `/i/<id>` through the delivery pipeline, its row found by `lookup`. */
  const serve = async (lookup: () => ImageView | undefined) =>
    serveImage(app, { area: "i", request: new Request(`http://kura.test/i/${id}`), isPublic: true, lookup });
  expect((await serve(() => app.lookups.byId(id))).status).toBe(200);

  app.db.exec("ALTER TABLE images RENAME TO images_away");
  try {
    // A fresh row is needed: the remembered one would still answer for LOOKUP_TTL_MS.
    const failing = await serve(() => app.images.view(id));
    expect(failing.status).toBe(500);
    expect(failing.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(failing.headers.get("cache-control")).toBeNull(); // spec 4.5: error statuses carry no caching headers
    expect(await failing.text()).toBe("图片元数据查询失败，请稍后重试");
    const logged = logs.filter((l) => l.msg === "图片元数据查询失败");
    expect(logged.map((l) => l.level)).toEqual(["ERROR"]);
    expect(String(logged[0]!.fields.err)).toContain("images");
  } finally {
    app.db.exec("ALTER TABLE images_away RENAME TO images");
  }
  expect((await serve(() => app.images.view(id))).status).toBe(200);
});
