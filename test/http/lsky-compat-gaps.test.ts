/**
 * The Lsky Pro V2 surface where it follows Lsky in small ways: strategies without a token, token
 * credentials in the query string, Lsky's `links.html`/`links.bbcode`, and `date` in the server's
 * local time zone (the server runs with TZ=Asia/Shanghai here, Lsky's default PRC).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeJpeg, makePng } from "../helpers/images";
import { specJson, startClientFixture, type ClientFixture } from "../clients/fixture";

/** UTC `YYYY-MM-DD HH:MM:SS` moved by `hours`, in the same format. */
function shifted(utc: string, hours: number): string {
  return new Date(Date.parse(`${utc.replace(" ", "T")}Z`) + hours * 3_600_000).toISOString().slice(0, 19).replace("T", " ");
}

describe("Lsky Pro V2 API: the small compatibility points", () => {
  let f: ClientFixture;
  let seed = 900;
  beforeAll(async () => {
    f = await startClientFixture({ TZ: "Asia/Shanghai" });
  });
  afterAll(async () => {
    await f.dispose();
  });

  const auth = () => ({ authorization: `Bearer ${f.token}` });
  /**
   * A multipart upload written by hand: the name goes as RFC 5987 `filename*`, which can carry a
   * `"` (FormData would send it as %22).
   */
  const upload = async (bytes: Uint8Array, name: string) => {
    const boundary = `b${seed}x`;
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename*=utf-8''${encodeURIComponent(name)}\r\nContent-Type: image/png\r\n\r\n`;
    const body = Buffer.concat([Buffer.from(head), bytes, Buffer.from(`\r\n--${boundary}--\r\n`)]);
    const headers = { ...auth(), "content-type": `multipart/form-data; boundary=${boundary}` };
    const res = await fetch(f.server.url("/api/v1/upload"), { method: "POST", headers, body });
    expect(res.status).toBe(200);
    return (await specJson(res, "POST", "/api/v1/upload")).data;
  };

  test("GET /api/v1/strategies answers without a token (Lsky lists the guest group's), the same list as with one", async () => {
    const get = async (headers: Record<string, string>) => {
      const res = await fetch(f.server.url("/api/v1/strategies"), { headers });
      expect(res.status).toBe(200);
      return specJson(res, "GET", "/api/v1/strategies");
    };
    const authed = await get(auth());
    expect(authed).toEqual({ status: true, message: "success", data: { strategies: [{ id: 1, name: "Kura" }] } });
    expect(await get({})).toEqual(authed);
    // Outside auth:sanctum, Lsky never looks at the token here: a wrong one changes nothing.
    expect(await get({ authorization: `Bearer kura_aaaaaaaaaaaa_${"A".repeat(43)}` })).toEqual(authed);
  });

  test("POST /api/v1/tokens reads email and password from the query string too; the body's fields win", async () => {
    const name = `q${seed++}`;
    await f.admin.json("POST", "/api/admin/users", { name, password: "query-password-1", role: "user" }, 201);
    const tokens = (query: string, init: RequestInit = {}) => fetch(f.server.url(`/api/v1/tokens${query}`), { method: "POST", ...init });
    const fromQuery = await tokens(`?email=${name}&password=query-password-1`);
    expect(fromQuery.status).toBe(200);
    const issued = await specJson(fromQuery, "POST", "/api/v1/tokens");
    expect(issued.status).toBe(true);
    const up = await fetch(f.server.url("/api/v1/profile"), { headers: { authorization: `Bearer ${issued.data.token}` } });
    expect((await specJson(up, "GET", "/api/v1/profile")).data.name).toBe(name);
    // Laravel's input(): the body over the query.
    const json = { "content-type": "application/json" };
    const bodyWins = await tokens(`?email=${name}&password=wrong-one`, { headers: json, body: JSON.stringify({ password: "query-password-1" }) });
    expect((await specJson(bodyWins, "POST", "/api/v1/tokens")).status).toBe(true);
    // An empty body, even one labelled JSON, leaves the query's fields.
    const emptyJson = await tokens(`?email=${name}&password=query-password-1`, { headers: json, body: "" });
    expect((await specJson(emptyJson, "POST", "/api/v1/tokens")).status).toBe(true);
    // A refusal stays Lsky's fail(): HTTP 200, status false.
    const wrong = await tokens(`?email=${name}&password=wrong-one`);
    expect(wrong.status).toBe(200);
    expect(await specJson(wrong, "POST", "/api/v1/tokens")).toEqual({ status: false, message: "用户名或密码错误", data: {} });
    const missing = await tokens(`?email=${name}`);
    expect(missing.status).toBe(200);
    expect((await specJson(missing, "POST", "/api/v1/tokens")).status).toBe(false);
  });

  test("links.html and links.bbcode are Lsky's forms; the name is escaped inside the escaped tag", async () => {
    const plain = await upload(await makePng(20, 20, seed++), "截图 1.png");
    const url = f.server.url(`/i/${plain.key}.png`);
    expect(plain.links.html).toBe(`&lt;img src="${url}" alt="截图 1.png" title="截图 1.png" /&gt;`);
    expect(plain.links.bbcode).toBe(`[img]${url}[/img]`);

    const odd = await upload(await makePng(20, 20, seed++), `a"b<i>&c.png`);
    const oddUrl = f.server.url(`/i/${odd.key}.png`);
    const attr = "a&amp;quot;b&amp;lt;i&amp;gt;&amp;amp;c.png";
    expect(odd.links.html).toBe(`&lt;img src="${oddUrl}" alt="${attr}" title="${attr}" /&gt;`);
    // Shown as text (what Lsky's page does), it is a tag whose attributes hold the whole name.
    const shown = odd.links.html.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    expect(shown).toBe(`<img src="${oddUrl}" alt="a&quot;b&lt;i&gt;&amp;c.png" title="a&quot;b&lt;i&gt;&amp;c.png" />`);
    // The same links in the list.
    const list = await specJson(await fetch(f.server.url("/api/v1/images?keyword=a%22b"), { headers: auth() }), "GET", "/api/v1/images");
    expect(list.data.data[0].links).toEqual(odd.links);
  });

  test("date in the list is the server's local time (TZ=Asia/Shanghai: UTC+8), human_date unchanged", async () => {
    const own = await upload(await makeJpeg(16, 16, seed++), "dated.jpg");
    const stored = await f.admin.json("GET", `/api/admin/images/${own.key}`);
    const list = await specJson(await fetch(f.server.url("/api/v1/images?keyword=dated"), { headers: auth() }), "GET", "/api/v1/images");
    const item = list.data.data[0];
    expect(item.key).toBe(own.key);
    expect(item.date).toBe(shifted(stored.created_at, 8));
    expect(item.human_date).toBe("刚刚");
  });
});
