/**
 * Slow small bodies cannot pile up memory (src/http/body-limit.ts), black-box: bodies held open
 * by one client address count against its 4 MiB share (the next is 429, in Chinese, and the
 * connection closes), another address is not affected, the held bytes show in
 * `kura_http_body_bytes_held`, and everything is given back once the bodies complete.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SMALL_BODY_PER_CLIENT_BYTES } from "../../src/http/body-limit";
import { metricValue } from "../helpers/metrics";
import { KuraServer } from "../helpers/server";
import { RawRequest } from "./raw-upload.helpers";

let server: KuraServer;
beforeAll(async () => {
  // Loopback is the proxy, so each request's X-Forwarded-For is its client address.
  server = await KuraServer.start({ env: { KURA_TRUSTED_PROXIES: "127.0.0.1,::1" } });
});
afterAll(() => server.dispose());

const BODY = 1024 * 1024;
const held = () => metricValue(server.base, "kura_http_body_bytes_held");
async function until(done: () => Promise<boolean>) {
  for (let i = 0; i < 200 && !(await done()); i++) await Bun.sleep(25);
  expect(await done()).toBe(true);
}
/** A login whose 1 MiB JSON body is sent but for its last byte. */
function slowLogin(client: string) {
  const head = [
    "POST /api/admin/auth/login HTTP/1.1",
    `Host: ${new URL(server.base).host}`,
    "Content-Type: application/json",
    `Content-Length: ${BODY}`,
    `X-Forwarded-For: ${client}`,
  ].join("\r\n");
  const body = Buffer.from(`{"name":"nobody","password":"${"x".repeat(BODY - 32)}`.padEnd(BODY - 1, " "));
  return RawRequest.open(server, head, body);
}

test("one address's slow bodies hold at most its share; the next is 429 and closed; others go on; all is given back", async () => {
  const share = SMALL_BODY_PER_CLIENT_BYTES / BODY;
  const holding = await Promise.all(Array.from({ length: share }, () => slowLogin("203.0.113.7")));
  await until(async () => (await held()) === share * (BODY - 1));

  const over = await slowLogin("203.0.113.7");
  const refused = await over.answer;
  expect([refused?.status, refused?.headers["retry-after"], refused?.headers.connection]).toEqual([429, "5", "close"]);
  expect(JSON.parse(refused!.body)).toEqual({ error: "该地址同时发送的请求过多，请稍后重试" });
  expect(await held()).toBe(share * (BODY - 1));

  // Another address is not held up by this one's share.
  const elsewhere = await fetch(server.url("/api/admin/auth/login"), {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": "198.51.100.9" },
    body: JSON.stringify({ name: "nobody", password: "wrong-password" }),
  });
  expect(elsewhere.status).toBe(401);

  // The held bodies complete and are answered as usual (their JSON is malformed: 400), and give their share back.
  for (const r of holding) r.send("}");
  const answers = await Promise.all(holding.map((r) => r.answer));
  expect(answers.map((a) => a?.status)).toEqual(Array.from({ length: share }, () => 400));
  await until(async () => (await held()) === 0);
  const again = await fetch(server.url("/api/admin/auth/login"), {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": "203.0.113.7" },
    body: JSON.stringify({ name: "nobody", password: "wrong-password" }),
  });
  expect(again.status).toBe(401);
});

test("a client that hangs up mid-body is no crash: no ERROR line, no 500 in the metrics, its share given back", async () => {
  const logged = server.logs.length;
  for (const path of ["/api/admin/auth/login", "/api/v1/tokens", "/api/admin/nothing"]) {
    const head = [`POST ${path} HTTP/1.1`, `Host: ${new URL(server.base).host}`, "Content-Type: application/json", "Content-Length: 100"].join("\r\n");
    const r = await RawRequest.open(server, head, '{"name":');
    await Bun.sleep(50);
    r.destroy();
  }
  await until(async () => (await held()) === 0);
  await Bun.sleep(100);
  expect(server.logs.slice(logged)).not.toContain("level=ERROR");
  const metrics = await (await fetch(server.url("/metrics"))).text();
  expect(metrics.split("\n").filter((l) => l.startsWith("kura_http_requests_total") && l.includes('status="500"'))).toEqual([]);
});
