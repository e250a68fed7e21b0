import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { adminSession, expectError, Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, htmlBytes, makeAnimated, makeJpeg, makePng, sha256, svgBytes } from "../helpers/images";
import { listFiles } from "../helpers/files";
import { KuraServer } from "../helpers/server";
import { openContext } from "../helpers/context";
import { PHASH_DELAY_MS, PhashSweep } from "../../src/images/phash-sweep";
import { waitFor } from "./channels.helpers";

/** Image objects on the default local channel. */
const storedFiles = (server: KuraServer) => listFiles(join(server.dataDir, "storage")).filter((f) => f.startsWith("img/"));

describe("admin file upload", () => {
  const { server, admin } = useAdmin();

  test("stores the image on the default local channel and describes it", async () => {
    const jpeg = await makeJpeg(120, 80, 7);
    const res = await admin.json("POST", "/api/admin/upload", form(jpeg, "cat.jpg", { exif_policy: "passthrough" }));
    expect(res.id).toMatch(/^[0-9A-Za-z]{10}$/);
    expect(res.url).toBe(`${server.base}/i/${res.id}`);
    const detail = await admin.json("GET", `/api/admin/images/${res.id}`);
    expect(detail).toMatchObject({
      id: res.id,
      url: `/i/${res.id}`,
      user_id: "default",
      token_id: null,
      token_name: null,
      file_name: "cat.jpg",
      mime: "image/jpeg",
      size: jpeg.length,
      width: 120,
      height: 80,
      sha256: sha256(jpeg), // passthrough keeps the bytes identical
      expire_at: null,
      ttl_seconds: null,
      access_count: 0,
      ref_count: 1,
    });
    expect(detail.replicas).toEqual([expect.objectContaining({ channel_name: "local", state: "done" })]);
    const files = storedFiles(server);
    expect(files.some((f) => f.includes(sha256(jpeg)))).toBe(true);
    const onDisk = await Bun.file(join(server.dataDir, "storage", files.find((f) => f.includes(sha256(jpeg)))!)).bytes();
    expect(sha256(onDisk)).toBe(sha256(jpeg));
  });

  test("every supported format is accepted and judged by content, not by name", async () => {
    const cases: [Buffer, string, string][] = [
      [await makePng(30, 20, 3), "x.gif", "image/png"],
      [await makeAnimated("gif"), "anim.gif", "image/gif"],
      [await makeAnimated("webp"), "anim.webp", "image/webp"],
      [
        await sharp({ create: { width: 16, height: 16, channels: 3, background: "#0a0" } })
          .avif()
          .toBuffer(),
        "a.avif",
        "image/avif",
      ],
    ];
    for (const [bytes, name, mime] of cases) {
      const { id } = await admin.json("POST", "/api/admin/upload", form(bytes, name));
      expect((await admin.json("GET", `/api/admin/images/${id}`)).mime).toBe(mime);
    }
    const anim = await admin.json("POST", "/api/admin/upload", form(await makeAnimated("gif", 32, 24, 4), "a.gif"));
    expect(await admin.json("GET", `/api/admin/images/${anim.id}`)).toMatchObject({ width: 32, height: 24 });
  });

  test("SVG, HTML and other non-images are 415 and leave nothing behind", async () => {
    const before = storedFiles(server).length;
    for (const [bytes, name] of [
      [svgBytes, "logo.svg"],
      [htmlBytes, "page.png"],
      [Buffer.from("just text pretending"), "fake.jpg"],
      [Buffer.from("GIF89a but truncated"), "x.gif"],
    ] as const) {
      await expectError(await admin.request("POST", "/api/admin/upload", form(bytes, name)), 415);
    }
    // A JPEG whose segments walk cleanly but hold no frame: it is stripped and on its way to
    // the disk before sharp reads its header, and must still be refused and leave nothing.
    const frameless = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, ...Buffer.from("JFIF\0"), 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xd9]);
    for (const policy of ["strip", "passthrough"]) {
      await expectError(await admin.request("POST", "/api/admin/upload", form(frameless, "frameless.jpg", { exif_policy: policy })), 415);
    }
    // What is not an image is said to be unsupported; a PNG cut in half is said to be damaged
    // (it was "unsupported format", which misled its owner).
    expect(await expectError(await admin.request("POST", "/api/admin/upload", form(htmlBytes, "page.png")), 415)).toContain("不支持的图片格式");
    const png = await makePng(300, 200, 17);
    for (const policy of ["strip", "passthrough"]) {
      const cut = await expectError(await admin.request("POST", "/api/admin/upload", form(png.subarray(0, 40), "cut.png", { exif_policy: policy })), 415);
      expect(cut).toBe("图片数据不完整或已损坏，无法读取（PNG）");
    }
    // And an empty file is said to be empty, not of a wrong format.
    expect(await expectError(await admin.request("POST", "/api/admin/upload", form(new Uint8Array(0), "empty.jpg")), 415)).toBe("文件为空（0 字节），不是图片");
    expect(storedFiles(server).length).toBe(before);
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
  });

  test("strip removes EXIF/GPS but keeps the displayed orientation; passthrough keeps every byte", async () => {
    const rotated = await makeJpeg(60, 40, 11, { exif: { IFD0: { Make: "KuraCam", Model: "SecretModel" }, IFD3: { GPSLatitudeRef: "N" } }, orientation: 6 });
    const stripped = await admin.json("POST", "/api/admin/upload", form(rotated, "r.jpg", { exif_policy: "strip" }));
    const d = await admin.json("GET", `/api/admin/images/${stripped.id}`);
    expect(d.sha256).not.toBe(sha256(rotated));
    // Displayed size: orientation 6 turns 60x40 into 40x60.
    expect([d.width, d.height]).toEqual([40, 60]);
    const file = storedFiles(server).find((f) => f.includes(d.sha256))!;
    const bytes = await Bun.file(join(server.dataDir, "storage", file)).bytes();
    const meta = await sharp(bytes).metadata();
    expect(meta.orientation).toBe(6);
    const exifText = meta.exif ? Buffer.from(meta.exif).toString("latin1") : "";
    expect(exifText).not.toContain("KuraCam");
    expect(exifText).not.toContain("SecretModel");
    const shown = await sharp(bytes).rotate().toBuffer({ resolveWithObject: true });
    expect([shown.info.width, shown.info.height]).toEqual([40, 60]);

    const kept = await admin.json("POST", "/api/admin/upload", form(rotated, "r2.jpg", { exif_policy: "passthrough" }));
    expect((await admin.json("GET", `/api/admin/images/${kept.id}`)).sha256).toBe(sha256(rotated));
    await expectError(await admin.request("POST", "/api/admin/upload", form(rotated, "r.jpg", { exif_policy: "maybe" })), 400);
  });

  test("form fields over 1 KiB, a missing file and non-multipart bodies are 400", async () => {
    const jpeg = await makeJpeg(10, 10, 2);
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg, "a.jpg", { ttl: "1".repeat(1025) })), 400);
    const noFile = new FormData();
    noFile.append("ttl", "60");
    await expectError(await admin.request("POST", "/api/admin/upload", noFile), 400);
    await expectError(await admin.request("POST", "/api/admin/upload", { file: "x" }), 400);
    // Query parameters are never read as form fields.
    const viaQuery = await admin.json("POST", "/api/admin/upload?ttl=60", form(jpeg, "q.jpg"));
    expect((await admin.json("GET", `/api/admin/images/${viaQuery.id}`)).ttl_seconds).toBeNull();
  });

  test("TTL falls back from the form to the user default to the global default", async () => {
    const jpeg = await makeJpeg(12, 12, 3);
    const withTtl = await admin.json("POST", "/api/admin/upload", form(jpeg, "t.jpg", { ttl: "3600" }));
    const d1 = await admin.json("GET", `/api/admin/images/${withTtl.id}`);
    expect(d1.ttl_seconds).toBe(3600);
    const expires = Date.parse(`${d1.expire_at.replace(" ", "T")}Z`);
    expect(Math.abs(expires - (Date.now() + 3600_000))).toBeLessThan(10_000);
    const never = await admin.json("POST", "/api/admin/upload", form(jpeg, "t.jpg", { ttl: "never" }));
    expect((await admin.json("GET", `/api/admin/images/${never.id}`)).expire_at).toBeNull();
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg, "t.jpg", { ttl: "3153600001" })), 400);
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg, "t.jpg", { ttl: "-1" })), 400);

    await admin.json("PUT", "/api/admin/config", { default_ttl_hours: 5 });
    const global = await admin.json("POST", "/api/admin/upload", form(jpeg, "g.jpg"));
    expect((await admin.json("GET", `/api/admin/images/${global.id}`)).ttl_seconds).toBe(5 * 3600);
    const user = await admin.json("POST", "/api/admin/users", { name: "ttl-user", password: "password-1", default_ttl_hours: 2 }, 201);
    const s = new Session(server);
    await s.login("ttl-user", "password-1");
    const viaUser = await s.json("POST", "/api/admin/upload", form(jpeg, "u.jpg"));
    expect((await s.json("GET", `/api/admin/images/${viaUser.id}`)).ttl_seconds).toBe(2 * 3600);
    await admin.json("PUT", `/api/admin/users/${user.id}`, { name: "ttl-user", role: "user", quota_bytes: null, default_ttl_hours: 0, disabled: false });
    const permanent = await s.json("POST", "/api/admin/upload", form(jpeg, "u.jpg"));
    expect((await s.json("GET", `/api/admin/images/${permanent.id}`)).ttl_seconds).toBeNull();
    await admin.json("PUT", "/api/admin/config", { default_ttl_hours: 0 });
  });

  test("identical content from two users shares one blob; each reference counts in full", async () => {
    const bytes = await makePng(50, 50, 99);
    await admin.json("POST", "/api/admin/users", { name: "dup-a", password: "password-1" }, 201);
    await admin.json("POST", "/api/admin/users", { name: "dup-b", password: "password-1" }, 201);
    const a = new Session(server);
    const b = new Session(server);
    await a.login("dup-a", "password-1");
    await b.login("dup-b", "password-1");
    const ia = await a.json("POST", "/api/admin/upload", form(bytes, "a.png"));
    const ib = await b.json("POST", "/api/admin/upload", form(bytes, "b.png"));
    expect(ia.id).not.toBe(ib.id);
    const da = await a.json("GET", `/api/admin/images/${ia.id}`);
    const db = await b.json("GET", `/api/admin/images/${ib.id}`);
    expect(da.sha256).toBe(db.sha256);
    // The blob has two references; each user sees only their own, the admin sees both.
    expect(db.ref_count).toBe(1);
    expect((await admin.json("GET", `/api/admin/images/${ib.id}`)).ref_count).toBe(2);
    expect(storedFiles(server).filter((f) => f.includes(da.sha256))).toHaveLength(1);
    const users = (await admin.json("GET", "/api/admin/users")).items;
    for (const name of ["dup-a", "dup-b"]) {
      expect(users.find((u: { name: string }) => u.name === name)).toMatchObject({ used_bytes: da.size, image_count: 1 });
    }
  });

  test("Idempotency-Key replays the same image for the same user only", async () => {
    const bytes = await makeJpeg(20, 20, 41);
    const first = await admin.request("POST", "/api/admin/upload", form(bytes, "i.jpg"), { "idempotency-key": "retry-1" });
    const second = await admin.request("POST", "/api/admin/upload", form(bytes, "i.jpg"), { "idempotency-key": "retry-1" });
    const [f, s] = [await first.json(), await second.json()];
    expect(s.id).toBe(f.id);
    const other = await admin.request("POST", "/api/admin/upload", form(bytes, "i.jpg"), { "idempotency-key": "retry-2" });
    expect((await other.json()).id).not.toBe(f.id);
    const list = await admin.json("GET", "/api/admin/images?search=i.jpg&page_size=100");
    expect(list.items.filter((i: { id: string }) => i.id === f.id)).toHaveLength(1);
  });

  test("quota full is 403 and stores nothing", async () => {
    const user = await admin.json("POST", "/api/admin/users", { name: "small", password: "password-1", quota_bytes: 2000 }, 201);
    const s = new Session(server);
    await s.login("small", "password-1");
    const big = await sharp(Buffer.from(crypto.getRandomValues(new Uint8Array(60 * 60 * 3))), { raw: { width: 60, height: 60, channels: 3 } })
      .png()
      .toBuffer();
    expect(big.length).toBeGreaterThan(2000);
    const before = storedFiles(server).length;
    expect(await expectError(await s.request("POST", "/api/admin/upload", form(big, "big.png")), 403)).toContain("配额");
    expect(storedFiles(server).length).toBe(before);
    expect((await admin.json("GET", "/api/admin/users")).items.find((u: { id: string }) => u.id === user.id).image_count).toBe(0);
  });

  test("a user who owns images cannot be deleted (409)", async () => {
    const u = await admin.json("POST", "/api/admin/users", { name: "owner", password: "password-1" }, 201);
    const s = new Session(server);
    await s.login("owner", "password-1");
    const { id } = await s.json("POST", "/api/admin/upload", form(await makeJpeg(8, 8, 77), "o.jpg"));
    await expectError(await admin.request("DELETE", `/api/admin/users/${u.id}`), 409);
    await s.json("DELETE", `/api/admin/images/${id}`, undefined, 204);
    expect((await admin.request("DELETE", `/api/admin/users/${u.id}`)).status).toBe(204);
  });

  test("upload_duration metric counts ok and rejected outcomes", async () => {
    const text = await (await fetch(server.url("/metrics"))).text();
    expect(text).toMatch(/kura_upload_duration_seconds_count\{outcome="ok"\} [1-9]/);
    expect(text).toMatch(/kura_upload_duration_seconds_count\{outcome="rejected"\} [1-9]/);
    expect(text).toMatch(/kura_channel_puts_total\{channel="local",result="ok"\} [1-9]/);
    expect(text).toMatch(/kura_queue_jobs_waiting \d/);
  });
});

describe("size, pixel and rate limits", () => {
  const { server, admin } = useAdmin();

  test("larger than max_upload_mb is 413 and leaves no temp file", async () => {
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    const noisy = await sharp(Buffer.from(crypto.getRandomValues(new Uint8Array(900 * 900 * 3))), { raw: { width: 900, height: 900, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toBuffer();
    expect(noisy.length).toBeGreaterThan(1024 * 1024);
    expect(await expectError(await admin.request("POST", "/api/admin/upload", form(noisy, "big.png")), 413)).toContain("MB");
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
    await admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
  });

  test("above the pixel budget is 422, judged before a full decode", async () => {
    await admin.json("PUT", "/api/admin/config", { max_pixels_mp: 1 });
    const wide = await sharp({ create: { width: 2000, height: 600, channels: 3, background: "#222" } })
      .png()
      .toBuffer();
    const before = storedFiles(server).length;
    for (const policy of ["strip", "passthrough"]) {
      await expectError(await admin.request("POST", "/api/admin/upload", form(wide, "wide.png", { exif_policy: policy })), 422);
    }
    expect(storedFiles(server).length).toBe(before);
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
    await admin.json("PUT", "/api/admin/config", { max_pixels_mp: 100 });
    await admin.json("POST", "/api/admin/upload", form(wide, "wide.png"));
  });

  test("upload_rate_per_min gives 429 with Retry-After", async () => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 2 });
    const jpeg = await makeJpeg(8, 8, 1);
    await admin.json("POST", "/api/admin/upload", form(jpeg, "r.jpg"));
    await admin.json("POST", "/api/admin/upload", form(jpeg, "r.jpg"));
    const limited = await admin.request("POST", "/api/admin/upload", form(jpeg, "r.jpg"));
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    await expectError(limited, 429);
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 1000 });
  });

  test("a change of upload_rate_per_min keeps what each user has used: a change and its undo hand out no extra burst", async () => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 2 });
    const jpeg = await makeJpeg(8, 8, 2);
    for (let i = 0; i < 2; i++) await admin.json("POST", "/api/admin/upload", form(jpeg, "r.jpg"));
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg, "r.jpg")), 429);
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 3 });
    await admin.json("POST", "/api/admin/upload", form(jpeg, "r.jpg")); // the one more a raise allows
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 2 });
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg, "r.jpg")), 429);
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 1000 });
  });

  test("max_concurrent_uploads gives 429 while another upload is in flight", async () => {
    await admin.json("PUT", "/api/admin/config", { max_concurrent_uploads: 1 });
    const jpeg = await makeJpeg(16, 16, 4);
    const boundary = "kuraboundary";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slowBody = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode(head));
        controller.enqueue(jpeg.subarray(0, 10));
        await gate;
        controller.enqueue(jpeg.subarray(10));
        controller.enqueue(new TextEncoder().encode(`\r\n--${boundary}--\r\n`));
        controller.close();
      },
    });
    const slow = fetch(server.url("/api/admin/upload"), {
      method: "POST",
      headers: { cookie: admin.cookie, "x-csrf-token": admin.csrf, "content-type": `multipart/form-data; boundary=${boundary}` },
      body: slowBody,
      duplex: "half",
    } as RequestInit);
    // Admitted: its file part is being written to tmp/ (the gate holds the rest of it back).
    await waitFor(
      async () => readdirSync(join(server.dataDir, "tmp")).length,
      (n) => n > 0,
      15_000,
      "the slow upload to be admitted and writing its temp file",
    );
    const busy = await admin.request("POST", "/api/admin/upload", form(jpeg, "fast.jpg"));
    expect(busy.headers.get("retry-after")).toBe("1");
    await expectError(busy, 429);
    release();
    expect((await slow).status).toBe(200);
    await admin.json("POST", "/api/admin/upload", form(jpeg, "fast.jpg"));
    await admin.json("PUT", "/api/admin/config", { max_concurrent_uploads: 16 });
  });

  test("no writable channel is 503 and leaves no image row and no object", async () => {
    const db = new Database(join(server.dataDir, "kura.db"));
    const before = db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM images").get()!.n;
    // Break the local channel: its directory becomes a plain file, so writes fail.
    const storage = join(server.dataDir, "storage");
    await Bun.$`mv ${storage} ${storage}.bak && touch ${storage}`;
    try {
      const res = await admin.request("POST", "/api/admin/upload", form(await makeJpeg(9, 9, 123), "x.jpg"));
      await expectError(res, 503);
      expect(db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM images").get()!.n).toBe(before);
      expect(db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM upload_intents").get()!.n).toBe(0);
    } finally {
      await Bun.$`rm -f ${storage} && mv ${storage}.bak ${storage}`;
      db.close();
    }
    expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
  });
});

describe("perceptual hash", () => {
  test("is left to the background sweep after the upload (no job row), which stores 16 hex digits", async () => {
    const server = await KuraServer.start();
    const admin = await adminSession(server);
    const { id } = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(64, 64, 321), "p.jpg"));
    const sha = (await admin.json("GET", `/api/admin/images/${id}`)).sha256;
    await server.stop();
    const { app, close } = await openContext(server.dataDir);
    try {
      const blob = app.images.blobBySha(sha)!;
      expect(blob.phash).toBe("");
      expect(app.db.query("SELECT COUNT(*) AS n FROM jobs WHERE kind = 'blob.phash'").get()).toEqual({ n: 0 });
      const sweep = new PhashSweep();
      // Not while the upload burst may go on…
      expect(await sweep.round(app)).toEqual({ hashed: 0, failed: 0 });
      expect(app.images.blob(blob.id)!.phash).toBe("");
      // …then the next round after the delay hashes it.
      expect(await sweep.round(app, Date.now() + PHASH_DELAY_MS + 1000)).toEqual({ hashed: 1, failed: 0 });
      expect(app.images.blob(blob.id)!.phash).toMatch(/^[0-9a-f]{16}$/);
    } finally {
      close();
      await server.dispose();
    }
  });
});

describe("synchronous replicas", () => {
  test("fewer healthy channels than min_success is 503 and leaves no image and no object", async () => {
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      await admin.json("PUT", "/api/admin/config", { min_success: 2 });
      const before = storedFiles(server);
      await expectError(await admin.request("POST", "/api/admin/upload", form(await makeJpeg(30, 30, 909), "two.jpg")), 503);
      expect(storedFiles(server)).toEqual(before);
      expect((await admin.json("GET", "/api/admin/images")).total).toBe(0);
    } finally {
      await server.dispose();
    }
  });
});

describe("large uploads stream through a temp file", () => {
  test("a body over the in-memory limit gives the same results as a small one (strip and passthrough)", async () => {
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      const noise = Buffer.from(crypto.getRandomValues(new Uint8Array(2600 * 2000 * 3)));
      const big = await sharp(noise, { raw: { width: 2600, height: 2000, channels: 3 } })
        .jpeg({ quality: 95 })
        .withExif({ IFD0: { Make: "BigCam" } })
        .withMetadata({ orientation: 6 })
        .toBuffer();
      expect(big.length).toBeGreaterThan(4 * 1024 * 1024);
      const kept = await admin.json("POST", "/api/admin/upload", form(big, "big.jpg", { exif_policy: "passthrough" }));
      expect((await admin.json("GET", `/api/admin/images/${kept.id}`)).sha256).toBe(sha256(big));
      const stripped = await admin.json("POST", "/api/admin/upload", form(big, "big.jpg", { exif_policy: "strip" }));
      const d = await admin.json("GET", `/api/admin/images/${stripped.id}`);
      expect([d.width, d.height]).toEqual([2000, 2600]);
      const file = storedFiles(server).find((f) => f.includes(d.sha256))!;
      const bytes = await Bun.file(join(server.dataDir, "storage", file)).bytes();
      const meta = await sharp(bytes).metadata();
      expect(meta.orientation).toBe(6);
      expect(meta.exif ? Buffer.from(meta.exif).toString("latin1") : "").not.toContain("BigCam");
      expect(readdirSync(join(server.dataDir, "tmp"))).toEqual([]);
    } finally {
      await server.dispose();
    }
  });
});
