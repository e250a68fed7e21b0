import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { adminSession, expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg, makePng, sha256 } from "../helpers/images";
import { KuraServer } from "../helpers/server";

describe("URL import and the token data plane", () => {
  let origin: ReturnType<typeof Bun.serve>;
  let png: Buffer;
  let token: string;

  beforeAll(async () => {
    png = await makePng(40, 30, 17);
    origin = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const path = new URL(req.url).pathname;
        if (path === "/pics/%E5%9B%BE%E7%89%87.png") return new Response(new Uint8Array(png), { headers: { "content-type": "image/png" } });
        if (path === "/to-metadata") return Response.redirect("http://169.254.169.254/latest/meta-data", 302);
        if (path === "/svg") return new Response("<svg xmlns='http://www.w3.org/2000/svg'/>", { headers: { "content-type": "image/png" } });
        return new Response("missing", { status: 404 });
      },
    });
  });
  const { server, admin } = useAdmin({ env: { KURA_IMPORT_ALLOW: "127.0.0.1/32" } });
  beforeAll(async () => {
    token = (await admin.json("POST", "/api/admin/tokens", { name: "picgo" }, 201)).token;
  });
  afterAll(async () => {
    origin.stop(true);
  });

  const originUrl = (path: string) => `http://127.0.0.1:${origin.port}${path}`;

  test("admin URL import stores the image, naming it after the last path segment", async () => {
    const res = await admin.json("POST", "/api/admin/upload/url", { url: originUrl("/pics/%E5%9B%BE%E7%89%87.png") });
    const d = await admin.json("GET", `/api/admin/images/${res.id}`);
    expect(d).toMatchObject({ file_name: "图片.png", mime: "image/png", width: 40, height: 30 });
    const named = await admin.json("POST", "/api/admin/upload/url", { url: originUrl("/pics/%E5%9B%BE%E7%89%87.png"), file_name: "cover.png", ttl: "60" });
    expect(await admin.json("GET", `/api/admin/images/${named.id}`)).toMatchObject({ file_name: "cover.png", ttl_seconds: 60 });
  });

  test("URL import refuses bad schemes, upstream errors and non-images", async () => {
    await expectError(await admin.request("POST", "/api/admin/upload/url", { url: "ftp://example.com/a.png" }), 400);
    await expectError(await admin.request("POST", "/api/admin/upload/url", { url: "file:///etc/passwd" }), 400);
    await expectError(await admin.request("POST", "/api/admin/upload/url", { url: originUrl("/nothing") }), 400);
    await expectError(await admin.request("POST", "/api/admin/upload/url", { url: originUrl("/svg") }), 415);
    await expectError(await admin.request("POST", "/api/admin/upload/url", {}), 400);
  });

  test("a redirect to the metadata address is refused even from an allowed origin", async () => {
    expect(await expectError(await admin.request("POST", "/api/admin/upload/url", { url: originUrl("/to-metadata") }), 400)).toMatch(/[\u4e00-\u9fff]/);
  });

  test("bearer uploads: file (PicGo/ShareX shape), object_key aliases, and URL import", async () => {
    const jpeg = await makeJpeg(25, 25, 61);
    const auth = { authorization: `Bearer ${token}` };
    const up = await fetch(server.url("/api/upload"), {
      method: "POST",
      headers: auth,
      body: form(jpeg, "shot.jpg", { object_key: "2026/shot.jpg", exif_policy: "passthrough" }),
    });
    expect(up.status).toBe(200);
    const { id, url } = await up.json();
    expect(url).toBe(`${server.base}/i/${id}`);
    const d = await admin.json("GET", `/api/admin/images/${id}`);
    expect(d).toMatchObject({ token_name: "picgo", sha256: sha256(jpeg), user_id: "default" });
    expect(d.token_id).toBeNumber();
    // Re-uploading the same key re-points the alias.
    const again = await (
      await fetch(server.url("/api/upload"), {
        method: "POST",
        headers: auth,
        body: form(await makeJpeg(25, 25, 62), "shot.jpg", { object_key: "2026/shot.jpg" }),
      })
    ).json();
    const db = new Database(join(server.dataDir, "kura.db"), { readonly: true });
    const aliased = db.query<{ id: string }, []>("SELECT id FROM images WHERE object_key = '2026/shot.jpg'").all();
    db.close();
    expect(aliased).toEqual([{ id: again.id }]);

    const viaUrl = await fetch(server.url("/api/upload/url"), {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ url: originUrl("/pics/%E5%9B%BE%E7%89%87.png"), object_key: "imported/a.png" }),
    });
    expect(viaUrl.status).toBe(200);
    for (const bad of ["/abs", "a/../b", "a//b", ""]) {
      const r = await fetch(server.url("/api/upload"), { method: "POST", headers: auth, body: form(jpeg, "x.jpg", { object_key: bad }) });
      await expectError(r, 400);
    }
  });

  test("the data plane refuses missing, wrong and revoked tokens with 401; admin endpoints refuse tokens", async () => {
    const jpeg = await makeJpeg(10, 10, 62);
    await expectError(await fetch(server.url("/api/upload"), { method: "POST", body: form(jpeg) }), 401);
    await expectError(
      await fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: "Bearer kura_aaaaaaaaaaaa_nope" }, body: form(jpeg) }),
      401,
    );
    await expectError(await fetch(server.url("/api/admin/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(jpeg) }), 401);
    const t = await admin.json("POST", "/api/admin/tokens", { name: "short-lived" }, 201);
    await admin.json("POST", `/api/admin/tokens/${t.id}/revoke`, undefined, 204);
    await expectError(await fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${t.token}` }, body: form(jpeg) }), 401);
  });

  test("session uploads need CSRF and an upload with the default password is locked", async () => {
    const jpeg = await makeJpeg(10, 10, 63);
    await expectError(await admin.request("POST", "/api/admin/upload", form(jpeg), { "x-csrf-token": "" }), 403);
    await expectError(await admin.request("POST", "/api/admin/upload/url", { url: originUrl("/x") }, { "x-csrf-token": "bad" }), 403);
    await expectError(await fetch(server.url("/api/admin/upload"), { method: "POST", body: form(jpeg) }), 401);
  });
});

describe("URL import without an allowance", () => {
  test("loopback, private and link-local addresses are refused", async () => {
    const server = await KuraServer.start();
    try {
      const admin = await adminSession(server);
      for (const url of [
        "http://127.0.0.1:1/a.png",
        "http://10.0.0.1/a.png",
        "http://[::1]/a.png",
        "http://169.254.169.254/latest",
        "http://[::ffff:127.0.0.1]/a.png",
        "http://localhost/a.png",
      ]) {
        await expectError(await admin.request("POST", "/api/admin/upload/url", { url }), 400);
      }
    } finally {
      await server.dispose();
    }
  });
});
