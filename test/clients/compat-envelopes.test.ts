/**
 * Answers given before a request reaches its route (a body over the 1 MiB cap, an unusable Host) come
 * in the error shape of the surface the path belongs to: Lsky Pro's `{status: false, message, data}`,
 * Chevereto's `{status_code, error: {message, code}, status_txt}`, Kura's `{error}` everywhere else.
 * Unknown paths and methods there are refused in the same shapes (404; Chevereto's invalid action, 400, under /api/1/). The 413 also closes the connection: a client still sending the refused body otherwise held the
 * connection, and the server's graceful stop (this file's afterAll) waited a minute for it.
 */
import { expect, test } from "bun:test";
import { useServer } from "../helpers/fixture";
import { rawRequest } from "../helpers/raw-http";

const { server } = useServer();
const tooBig = JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) });
const post = (path: string) => fetch(server.url(path), { method: "POST", headers: { "content-type": "application/json" }, body: tooBig });

test("a body over the cap: Lsky Pro's shape on /api/v1/, Kura's elsewhere (413 each; /api/1/upload caps its own streamed body)", async () => {
  const lsky = await post("/api/v1/tokens");
  expect(lsky.status).toBe(413);
  expect(await lsky.json()).toEqual({ status: false, message: "请求体过大（最多 1 MiB）", data: {} });

  const kura = await post("/api/admin/auth/login");
  expect(kura.status).toBe(413);
  expect(await kura.json()).toEqual({ error: "请求体过大（最多 1 MiB）" });
});

test("no usable Host: Chevereto's and Lsky Pro's shapes on their paths, Kura's elsewhere (400 each)", async () => {
  const ask = (path: string) => rawRequest(server.base, `GET ${path} HTTP/1.0\r\n\r\n`);
  const chevereto = await ask("/api/1/upload?key=x&source=y");
  expect(chevereto.status).toBe(400);
  expect(JSON.parse(chevereto.text)).toMatchObject({ status_code: 400, error: { message: expect.stringContaining("Host"), code: 400 } });
  const lsky = await ask("/api/v1/profile");
  expect(lsky.status).toBe(400);
  expect(JSON.parse(lsky.text)).toMatchObject({ status: false, message: expect.stringContaining("Host"), data: {} });
  const kura = await ask("/api/admin/me");
  expect(kura.status).toBe(400);
  expect(JSON.parse(kura.text)).toEqual({ error: expect.stringContaining("Host") });
});

test("unknown paths and methods under /api/v1/ and /api/1/ are refused in that surface's shape, Kura's 404 or 405 elsewhere", async () => {
  const lskyNotFound = { status: false, message: "接口不存在", data: {} };
  const nope = await fetch(server.url("/api/v1/nope"));
  expect(nope.status).toBe(404);
  expect(await nope.json()).toEqual(lskyNotFound);
  // A known path under another method is a 405 with Allow, as Laravel answers Lsky's routes.
  for (const [method, path, allow] of [
    ["PUT", "/api/v1/upload", "POST"],
    ["POST", "/api/v1/images", "GET, HEAD"],
    ["PUT", "/api/v1/tokens", "DELETE, POST"],
  ] as const) {
    const res = await fetch(server.url(path), { method });
    expect([method, path, res.status, res.headers.get("allow")]).toEqual([method, path, 405, allow]);
    expect(await res.json()).toEqual({ status: false, message: `该接口不支持 ${method} 方法（可用：${allow}）`, data: {} });
  }
  // Under /api/1/ that is Chevereto's "Invalid API action": 400 with code 120 (clients/chevereto-errors.test.ts).
  for (const [method, path] of [
    ["POST", "/api/1/nope"],
    ["PUT", "/api/1/upload"],
    ["GET", "/api/1/"],
  ] as const) {
    const res = await fetch(server.url(path), { method });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ status_code: 400, error: { code: 120 }, status_txt: "Bad Request" });
  }
  const kura = await fetch(server.url("/api/nope"));
  expect(kura.status).toBe(404);
  expect(await kura.json()).toEqual({ error: "接口不存在" });
  for (const [method, path, allow] of [
    ["PATCH", "/api/admin/users", "GET, HEAD, POST"],
    ["DELETE", "/api/admin/config", "GET, HEAD, PUT"],
    ["POST", "/healthz", "GET, HEAD"],
    ["PUT", "/metrics", "GET, HEAD"],
  ] as const) {
    const res = await fetch(server.url(path), { method });
    expect([method, path, res.status, res.headers.get("allow")]).toEqual([method, path, 405, allow]);
    expect(await res.json()).toEqual({ error: `该接口不支持 ${method} 方法（可用：${allow}）` });
  }
  // Image access answers in plain text (spec 7), 405s included.
  for (const [method, path] of [
    ["POST", "/o/1/some/key.png"],
    ["DELETE", "/i/abcdefghij"],
  ] as const) {
    const res = await fetch(server.url(path), { method });
    expect([method, res.status, res.headers.get("allow"), res.headers.get("content-type")]).toEqual([method, 405, "GET, HEAD", "text/plain; charset=utf-8"]);
    expect(await res.text()).toBe(`该接口不支持 ${method} 方法（可用：GET, HEAD）`);
  }
});
