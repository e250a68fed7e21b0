/** The Lsky Pro V2 compatible API, driven by the real PicGo core with picgo-plugin-lankong and by plain requests. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PicGo } from "picgo";
import lankong from "picgo-plugin-lankong";
import { makeJpeg, makePng } from "../helpers/images";
import { sha256, specJson, startClientFixture, type ClientFixture } from "./fixture";

interface PicGoOutput {
  imgUrl?: string;
  id?: string;
  type?: string;
  error?: Error;
}

describe("Lsky Pro V2 API", () => {
  let f: ClientFixture;
  let seed = 100;
  beforeAll(async () => {
    f = await startClientFixture();
  });
  afterAll(async () => {
    await f.dispose();
  });

  const auth = () => ({ authorization: `Bearer ${f.token}` });
  const lskyUpload = async (bytes: Uint8Array, name = "shot.jpg", headers: Record<string, string> = auth()) => {
    const fd = new FormData();
    fd.append("strategy_id", "1");
    fd.append("file", new Blob([new Uint8Array(bytes)]), name);
    return fetch(f.server.url("/api/v1/upload"), { method: "POST", headers, body: fd });
  };

  function picgoWithLankong(): PicGo {
    const picgo = new PicGo(join(f.dir, `picgo-${seed++}.json`));
    picgo.use(lankong as never, "picgo-plugin-lankong");
    // As the README configures it: V2, the server root, "Bearer <token>" in the token field, sync delete on.
    const config = { lskyProVersion: "V2", server: f.server.base, token: `Bearer ${f.token}`, permission: 1, ignoreCertErr: false, syncDelete: true };
    picgo.setConfig({ "picBed.uploader": "lankong", "picBed.current": "lankong", "picBed.lankong": config });
    return picgo;
  }

  test("picgo-plugin-lankong uploads, the link serves the same bytes, and the plugin's delete removes the image", async () => {
    const jpeg = await makeJpeg(80, 60, seed++);
    const file = join(f.dir, "lankong.jpg");
    writeFileSync(file, jpeg);
    const picgo = picgoWithLankong();
    const out = (await picgo.upload([file])) as PicGoOutput[];
    expect(out.length).toBe(1);
    expect(out[0]!.error).toBeUndefined();
    const url = out[0]!.imgUrl!;
    const key = out[0]!.id!;
    expect(url).toBe(f.server.url(`/i/${key}.jpg`));
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/jpeg");
    expect(sha256(await res.arrayBuffer())).toBe(sha256(jpeg));
    // The upload is a normal image of the token's owner.
    const detail = await f.admin.json("GET", `/api/admin/images/${key}`);
    expect(detail.file_name).toBe("lankong.jpg");
    expect(detail.token_name).toMatch(/^clients-/);

    // PicGo's GUI emits "remove" with the gallery items; the plugin deletes them through DELETE /api/v1/images/{key}.
    // picgo-plugin-lankong 1.1.3 JSON.parse()s the answer of that DELETE, which PicGo 3's request helper has
    // already parsed (a request without formData gets the parsed body back): the plugin throws a SyntaxError
    // after the server answered, whatever Lsky server it talks to. The deletion itself must have happened.
    const item = { ...out[0]!, type: "lankong" };
    const [listener] = picgo.listeners("remove") as ((files: unknown[]) => Promise<void>)[];
    const failure = await listener!([item]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure === undefined || failure instanceof SyntaxError).toBe(true);
    expect((await fetch(url)).status).toBe(404);
    expect((await f.admin.request("GET", `/api/admin/images/${key}`)).status).toBe(404);
  });

  test("upload answer: Lsky's shape with links, KiB size and digests of the stored bytes", async () => {
    const png = await makePng(48, 32, seed++);
    const res = await lskyUpload(png, "图 [1].png");
    expect(res.status).toBe(200);
    expect(res.headers.get("connection")).toBe("close");
    const body = await specJson(res, "POST", "/api/v1/upload");
    expect(body.status).toBe(true);
    const d = body.data;
    const url = f.server.url(`/i/${d.key}.png`);
    expect(d).toMatchObject({ name: `${d.key}.png`, pathname: `${d.key}.png`, origin_name: "图 [1].png", mimetype: "image/png", extension: "png" });
    expect(d.size).toBeCloseTo(png.length / 1024, 6);
    expect(d.md5).toBe(new Bun.CryptoHasher("md5").update(png).digest("hex"));
    expect(d.sha1).toBe(new Bun.CryptoHasher("sha1").update(png).digest("hex"));
    expect(d.links).toEqual({
      url,
      // Lsky's forms (Image::links): the tag HTML-escaped once more, and a bare [img].
      html: `&lt;img src="${url}" alt="图 [1].png" title="图 [1].png" /&gt;`,
      bbcode: `[img]${url}[/img]`,
      markdown: `![图 1.png](${url})`,
      markdown_with_link: `[![图 1.png](${url})](${url})`,
      thumbnail_url: `${url}?w=320`,
    });
    expect((await fetch(d.links.thumbnail_url)).status).toBe(200);
  });

  test("a retry with the same Idempotency-Key answers the same image with its digests", async () => {
    const jpeg = await makeJpeg(40, 40, seed++);
    const headers = { ...auth(), "idempotency-key": `lsky-${seed}` };
    const first = await specJson(await lskyUpload(jpeg, "a.jpg", headers), "POST", "/api/v1/upload");
    const again = await specJson(await lskyUpload(jpeg, "a.jpg", headers), "POST", "/api/v1/upload");
    expect(again.data).toEqual(first.data);
  });

  /** A failed upload as PicGo, PicList and Twikoo need it: HTTP 200 (axios rejects anything else), status false, a Chinese message. */
  async function refusedWith200(res: Response, message: RegExp) {
    expect(res.status).toBe(200);
    const body = await specJson(res, "POST", "/api/v1/upload");
    expect(body).toMatchObject({ status: false, data: {} });
    expect(body.message).toMatch(message);
  }

  test("upload failures answer HTTP 200 with status false and the Chinese message, as Lsky does; only 401 and 429 keep theirs", async () => {
    const jpeg = await makeJpeg(20, 20, seed++);
    // Lsky: an Authorization that fails is a 401 (Handler::unauthenticated) ...
    const badToken = await lskyUpload(jpeg, "x.jpg", { authorization: `Bearer kura_aaaaaaaaaaaa_${"A".repeat(43)}` });
    expect(badToken.status).toBe(401);
    expect(await specJson(badToken, "POST", "/api/v1/upload")).toMatchObject({ status: false, data: {} });
    // ... none at all is a guest upload, refused through fail() (200) where guests may not upload.
    await refusedWith200(await lskyUpload(jpeg, "x.jpg", {}), /游客/);
    // A bare token (no "Bearer ") is accepted, as users paste it into the plugin.
    expect((await lskyUpload(jpeg, "x.jpg", { authorization: f.token })).status).toBe(200);
    await refusedWith200(await lskyUpload(new TextEncoder().encode("hello"), "x.txt"), /不支持的图片格式/);
    const noFile = new FormData();
    noFile.append("strategy_id", "1");
    await refusedWith200(await fetch(f.server.url("/api/v1/upload"), { method: "POST", headers: auth(), body: noFile }), /file/);
    await f.admin.json("PUT", "/api/admin/config", { max_upload_mb: 1 });
    try {
      const big = await lskyUpload(new Uint8Array(1024 * 1024 + 100).fill(7), "big.jpg");
      // The rest of the body is not read: the connection still closes with the answer.
      expect(big.headers.get("connection")).toBe("close");
      await refusedWith200(big, /[\u4e00-\u9fff]/);
    } finally {
      await f.admin.json("PUT", "/api/admin/config", { max_upload_mb: 20 });
    }
    const unauth = await fetch(f.server.url("/api/v1/profile"));
    expect(unauth.status).toBe(401);
    expect((await specJson(unauth, "GET", "/api/v1/profile")).status).toBe(false);
  });

  test("an upload over the user's quota answers 200 with status false and the quota message", async () => {
    const name = `quota${seed++}`;
    await f.admin.json("POST", "/api/admin/users", { name, password: "quota-password-1", role: "user", quota_bytes: 100 }, 201);
    const issued = await specJson(
      await fetch(f.server.url("/api/v1/tokens"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: name, password: "quota-password-1" }),
      }),
      "POST",
      "/api/v1/tokens",
    );
    const res = await lskyUpload(await makeJpeg(40, 40, seed++), "q.jpg", { authorization: `Bearer ${issued.data.token}` });
    await refusedWith200(res, /配额|空间/);
    const profile = await (await fetch(f.server.url("/api/v1/profile"), { headers: { authorization: `Bearer ${issued.data.token}` } })).json();
    expect([profile.data.capacity, profile.data.used_capacity]).toEqual([100 / 1024, 0]);
  });

  test("the upload counts against the same per-user rate limit as /api/upload", async () => {
    await f.admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 2 });
    try {
      const issued = await f.admin.json("POST", "/api/admin/tokens", { name: `rate-${seed}` }, 201);
      const headers = { authorization: `Bearer ${issued.token}` };
      // Changing the setting starts a fresh bucket of two per user: the third upload in a row is refused.
      const statuses: number[] = [];
      for (let i = 0; i < 2; i++) statuses.push((await lskyUpload(await makeJpeg(16, 16, seed++), "r.jpg", headers)).status);
      expect(statuses).toEqual([200, 200]);
      const limited = await lskyUpload(await makeJpeg(16, 16, seed++), "r.jpg", headers);
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
      expect((await specJson(limited, "POST", "/api/v1/upload")).status).toBe(false);
    } finally {
      await f.admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 120 });
    }
  });

  test("images, profile, strategies and albums answer in Lsky's shapes for the token's owner", async () => {
    const own = await specJson(await lskyUpload(await makeJpeg(30, 20, seed++), "listed.jpg"), "POST", "/api/v1/upload");
    const list = await specJson(await fetch(f.server.url("/api/v1/images?keyword=listed"), { headers: auth() }), "GET", "/api/v1/images");
    expect(list.data.total).toBe(1);
    expect(list.data.per_page).toBe(40);
    expect(list.data.data[0]).toMatchObject({ key: own.data.key, origin_name: "listed.jpg", width: 30, height: 20, links: own.data.links });
    expect(list.data.data[0].human_date).toBe("刚刚");

    const all = await specJson(await fetch(f.server.url("/api/v1/images?order=earliest"), { headers: auth() }), "GET", "/api/v1/images");
    const keys = all.data.data.map((i: { key: string }) => i.key);
    expect(keys.at(-1)).toBe(own.data.key);

    // Unknown orders (even names of inherited object members) fall back to newest first.
    for (const order of ["constructor", "__proto__", "bogus"]) {
      const odd = await fetch(f.server.url(`/api/v1/images?order=${order}`), { headers: auth() });
      expect(odd.status).toBe(200);
      expect((await specJson(odd, "GET", "/api/v1/images")).data.data[0].key).toBe(own.data.key);
    }

    const profile = await specJson(await fetch(f.server.url("/api/v1/profile"), { headers: auth() }), "GET", "/api/v1/profile");
    expect(profile.data.name).toBe("admin");
    expect(profile.data.image_num).toBe(all.data.total);
    // No quota: a capacity no upload reaches (0 would be "no room left" to a Lsky client).
    expect(profile.data.capacity).toBe(Number.MAX_SAFE_INTEGER / 1024);
    expect(profile.data.capacity - profile.data.used_capacity).toBeGreaterThan(1024 ** 4);
    expect(profile.data.used_capacity).toBeGreaterThan(0);

    const strategies = await specJson(await fetch(f.server.url("/api/v1/strategies"), { headers: auth() }), "GET", "/api/v1/strategies");
    expect(strategies.data).toEqual({ strategies: [{ id: 1, name: "Kura" }] });
    const albums = await specJson(await fetch(f.server.url("/api/v1/albums"), { headers: auth() }), "GET", "/api/v1/albums");
    expect(albums.data.data).toEqual([]);
    expect(albums.data.total).toBe(0);
    // Deleting an album is Lsky's success for an id the user has none of; it still needs the token.
    const dropAlbum = await fetch(f.server.url("/api/v1/albums/7"), { method: "DELETE", headers: auth() });
    expect(await specJson(dropAlbum, "DELETE", "/api/v1/albums/7")).toEqual({ status: true, message: "删除成功", data: {} });
    const anonymous = await fetch(f.server.url("/api/v1/albums/7"), { method: "DELETE" });
    expect(anonymous.status).toBe(401);
  });

  test("the images paginator: page URLs keep the query (withQueryString), Lsky's Chinese labels, a bad page is page 1", async () => {
    // 41 images whose names match the keyword: two pages of 40.
    for (let i = 0; i < 41; i++) await lskyUpload(await makeJpeg(8, 8, seed++), `pgx ${i}.jpg`);
    const list = async (query: string) => {
      const res = await fetch(f.server.url(`/api/v1/images${query}`), { headers: auth() });
      expect(res.status).toBe(200);
      return (await specJson(res, "GET", "/api/v1/images")).data;
    };
    const path = f.server.url("/api/v1/images");
    const first = await list("?order=earliest&keyword=pgx%20");
    expect(first).toMatchObject({ current_page: 1, last_page: 2, total: 41, from: 1, to: 40, path, prev_page_url: null });
    // http_build_query with RFC 3986 encoding; `page` goes last when the request had none.
    const pageUrl = (n: number) => `${path}?order=earliest&keyword=pgx%20&page=${n}`;
    expect(first.next_page_url).toBe(pageUrl(2));
    expect(first.first_page_url).toBe(pageUrl(1));
    expect(first.last_page_url).toBe(pageUrl(2));
    expect(first.links).toEqual([
      { url: null, label: "&laquo; 上一页", active: false },
      { url: pageUrl(1), label: "1", active: true },
      { url: pageUrl(2), label: "2", active: false },
      { url: pageUrl(2), label: "下一页 &raquo;", active: false },
    ]);
    expect(first.data[0].origin_name).toBe("pgx 0.jpg");
    // Following next_page_url gives page 2 of the same filtered, ordered list; `page` keeps its place.
    const second = (await specJson(await fetch(first.next_page_url, { headers: auth() }), "GET", "/api/v1/images")).data;
    expect(second).toMatchObject({ current_page: 2, from: 41, to: 41, prev_page_url: pageUrl(1), next_page_url: null });
    expect(second.data.map((i: { origin_name: string }) => i.origin_name)).toEqual(["pgx 40.jpg"]);
    const placed = await list("?page=2&keyword=pgx%20&order=earliest");
    expect(placed.prev_page_url).toBe(`${path}?page=1&keyword=pgx%20&order=earliest`);
    // Laravel reads an invalid page as page 1.
    for (const page of ["abc", "0", "-3", "1.5", "01"]) {
      expect([page, (await list(`?keyword=pgx%20&page=${page}`)).current_page]).toEqual([page, 1]);
    }
    // album_id as PHP's (int): non-zero asks for an album (there are none), anything else lists as usual.
    expect((await list("?keyword=pgx%20&album_id=3")).total).toBe(0);
    expect((await list("?keyword=pgx%20&album_id=abc")).total).toBe(41);
    // Every image is public: Lsky's permission filter finds none private, all public.
    expect((await list("?keyword=pgx%20&permission=private")).total).toBe(0);
    expect((await list("?keyword=pgx%20&permission=public")).total).toBe(41);
  });

  test("another user's key is not deleted (the answer is Lsky's idempotent success)", async () => {
    const mine = await specJson(await lskyUpload(await makeJpeg(24, 24, seed++), "keep.jpg"), "POST", "/api/v1/upload");
    await f.admin.json("POST", "/api/admin/users", { name: `other${seed}`, password: "other-password-1", role: "user" }, 201);
    const other = await specJson(
      await fetch(f.server.url("/api/v1/tokens"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: `other${seed}`, password: "other-password-1" }),
      }),
      "POST",
      "/api/v1/tokens",
    );
    const res = await fetch(f.server.url(`/api/v1/images/${mine.data.key}`), { method: "DELETE", headers: { authorization: `Bearer ${other.data.token}` } });
    expect((await specJson(res, "DELETE", `/api/v1/images/${mine.data.key}`)).status).toBe(true);
    expect((await fetch(mine.data.links.url)).status).toBe(200);
    // The owner's delete answers the same shape and removes it.
    const own = await fetch(f.server.url(`/api/v1/images/${mine.data.key}`), { method: "DELETE", headers: auth() });
    expect(await specJson(own, "DELETE", `/api/v1/images/${mine.data.key}`)).toEqual({ status: true, message: "删除成功", data: {} });
    expect((await fetch(mine.data.links.url)).status).toBe(404);
  });

  test("POST /api/v1/tokens: name and password give a working token; wrong passwords are rate-limited like login", async () => {
    const name = `tok${seed++}`;
    await f.admin.json("POST", "/api/admin/users", { name, password: "right-password-1", role: "user" }, 201);
    const issue = (password: string) =>
      fetch(f.server.url("/api/v1/tokens"), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ name, password }),
      });
    const broken = await fetch(f.server.url("/api/v1/tokens"), { method: "POST", headers: { "content-type": "application/json" }, body: "{name:" });
    // Lsky answers a refused token request through fail(): HTTP 200 with status false (TokenController::store).
    expect(broken.status).toBe(200);
    expect((await specJson(broken, "POST", "/api/v1/tokens")).status).toBe(false);
    const ok = await specJson(await issue("right-password-1"), "POST", "/api/v1/tokens");
    expect(ok.status).toBe(true);
    const up = await lskyUpload(await makeJpeg(16, 16, seed++), "t.jpg", { authorization: `Bearer ${ok.data.token}` });
    expect(up.status).toBe(200);
    const wrong = await issue("wrong-password");
    expect(wrong.status).toBe(200);
    expect(await specJson(wrong, "POST", "/api/v1/tokens")).toEqual({ status: false, message: "用户名或密码错误", data: {} });
    expect(f.server.logs).toMatch(/level=WARN msg=登录失败 client=\S+ user=\S+ via=lsky\n/);
    expect(f.server.logs).not.toContain("wrong-password");
    // Burst of 5 per client address and name (the login limiter): the next attempts are 429 even with the right password.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await issue("wrong-password")).status);
    expect(statuses.at(-1)).toBe(429);
    const limited = await issue("right-password-1");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
  });
});
