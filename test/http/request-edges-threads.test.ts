// With a delivery thread beside the main thread, the kernel spreads connections over both
// listeners (README "Delivery threads"): every request below goes on its own connection, many
// times, and must get one answer whichever listener accepted it (audit .scratch/audit-http, F6 and
// F7). Requests are written on raw TCP: fetch would collapse a leading `//` and always sends a Host.
import { beforeAll, describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";
import { metricValue } from "../helpers/metrics";
import { rawRequest, type RawResponse } from "../helpers/raw-http";
import { settled } from "../helpers/settle";

const { server, admin } = useAdmin({ env: { KURA_DELIVERY_THREADS: "1" } });
const TIMES = 24;
let id: string;
let png: Uint8Array;

beforeAll(async () => {
  await admin.json("PUT", "/api/admin/config", { exif_policy: "passthrough", upload_rate_per_min: 10_000 });
  png = await makePng(40, 30, 11);
  const token = (await admin.json("POST", "/api/admin/tokens", { name: "threads" }, 201)).token;
  const up = await fetch(server.url("/api/upload"), {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: form(png, "t.png", { object_key: "dir/sub/t.png" }),
  });
  id = ((await up.json()) as { id: string }).id;
});

/** The distinct answers (status and body) to TIMES copies of `request`, each on a fresh connection, eight at a time. */
async function answers(request: string): Promise<string[]> {
  const seen = new Set<string>();
  for (let i = 0; i < TIMES; i += 8) {
    const group: RawResponse[] = await Promise.all(Array.from({ length: 8 }, () => rawRequest(server.base, request)));
    for (const res of group) {
      const image = res.headers.get("content-type")?.startsWith("image/") && res.body.equals(Buffer.from(png));
      seen.add(`${res.status} ${image ? "<the image>" : res.text}`);
    }
  }
  return [...seen];
}

const withHost = (target: string) => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`;
const NOT_FOUND = `404 ${JSON.stringify({ error: "接口不存在" })}`;

describe("one answer whichever listener accepts the connection", () => {
  test("the kernel does give the thread connections (else this file would prove nothing)", async () => {
    const thread = 'kura_delivery_thread_answers_total{thread="1"}';
    const before = await metricValue(server.url(""), thread);
    expect(await answers(withHost(`/i/${id}`))).toEqual(["200 <the image>"]);
    await settled(
      () => metricValue(server.url(""), thread),
      (n) => n > before,
    );
  });

  test("a path starting with // is not found on every listener, as the main router has always answered it (F7)", async () => {
    for (const target of [`//i/${id}`, `//i/${id}?w=32`, "//o/default/dir/sub/t.png", "//healthz", `///i/${id}`]) {
      expect([target, await answers(withHost(target))]).toEqual([target, [NOT_FOUND]]);
    }
    // fetch would also drop a fragment on the way to the main thread (a target should not carry one, but Bun accepts it).
    for (const target of ["/healthz#x", "/api/admin/me#x"]) expect([target, (await answers(withHost(target))).length]).toEqual([target, 1]);
    // The same paths without the extra slash are served, on every listener.
    expect(await answers(withHost("/healthz"))).toEqual(["200 ok"]);
    expect(await answers(withHost("/o/default/dir/sub/t.png"))).toEqual(["200 <the image>"]);
  });

  test("without a usable Host: /healthz and /i/ are answered, everything else is 400, on every listener (F6)", async () => {
    const hostError = `400 ${JSON.stringify({ error: "请求头 Host 缺失或无效" })}`;
    const bare = (target: string, host = "") => `GET ${target} HTTP/1.0\r\n${host ? `Host: ${host}\r\n` : ""}\r\n`;
    for (const host of ["", "x y", 'x"y', "a:99999", "a%20b", "[::1"]) {
      expect([host, await answers(bare("/healthz", host))]).toEqual([host, ["200 ok"]]);
      // Dot segments are resolved as for a request with a Host, whichever listener normalizes them.
      expect([host, await answers(bare("/i/../healthz", host))]).toEqual([host, ["200 ok"]]);
      expect([host, await answers(bare(`/i/${id}`, host))]).toEqual([host, ["200 <the image>"]]);
      for (const target of ["//healthz", "/api/admin/me", "/o/default/dir/sub/t.png", "/healthz/../api/admin/me"]) {
        expect([host, target, await answers(bare(target, host))]).toEqual([host, target, [hostError]]);
      }
      // Dot segments in /i/: Bun leaves them in a URL it gave an origin it cannot parse (`a:99999`), where the
      // fast path answers 404 for an image ".."; a bare target is normalized first, to `/`, which needs a Host.
      for (const target of ["/i/%2e%2e", "/i/."]) {
        const expected = ["a:99999", "a%20b", "[::1"].includes(host) ? "404 图片不存在或已过期" : hostError;
        expect([host, target, await answers(bare(target, host))]).toEqual([host, target, [expected]]);
      }
    }
    expect(server.logs).not.toContain("level=ERROR");
  });
});
