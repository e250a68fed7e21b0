/**
 * Fault tier: the process out of file descriptors, for real (its limit lowered with prlimit while
 * it runs). An upload that cannot open its files answers a clear retryable error and leaves
 * nothing behind; connections beyond the limit wait in the backlog and are all answered once
 * descriptors free up; uploads work again afterwards; a start under a low limit is warned about.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { form, makePng } from "../helpers/images";
import { KuraServer } from "../helpers/server";
import sharp from "sharp";
import { errorCodeOf, errorMessageOf, type S3Fixture, signedRequest, startS3Fixture } from "../s3/s3-setup";
import { hardOpenFileLimit, openDescriptors, setSoftOpenFileLimit } from "./harness";

/** The hard limit this test process has, which the server inherited (and Bun raised its soft limit to). */
/**
 * The server's descriptor count once it holds still (unchanged for 200 ms): work of its own just
 * after start (or after a request) may hold descriptors for a moment, which would leave more to
 * spare than the test means once they close.
 */
async function settledFds(pid: number): Promise<number> {
  let last = openDescriptors(pid);
  for (let still = 0; still < 4; ) {
    await Bun.sleep(50);
    const now = openDescriptors(pid);
    still = now === last ? still + 1 : 0;
    last = now;
  }
  return last;
}
const imageRows = (dataDir: string) => {
  const db = new Database(join(dataDir, "kura.db"), { readonly: true });
  try {
    return (db.query("SELECT COUNT(*) AS n FROM images").get() as { n: number }).n;
  } finally {
    db.close();
  }
};
const tmpLeft = (dataDir: string) => readdirSync(join(dataDir, "tmp"), { recursive: true }).map(String);

describe("out of file descriptors", () => {
  let f: S3Fixture;
  let server: KuraServer;
  let token = "";
  beforeAll(async () => {
    f = await startS3Fixture();
    server = f.server;
    token = (await f.admin.json("POST", "/api/admin/tokens", { name: "fds" }, 201)).token;
  });
  afterAll(() => server.dispose());
  const pid = () => server.proc.pid;
  const upload = (name: string, png: Uint8Array) =>
    fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(png, name) });
  /**
   * Runs `fn` with no descriptor to spare, on the connection an earlier request left open (fetch
   * keeps it alive). Not "a few to spare": how many an upload holds at once depends on timing, so
   * a spare one or two made the outcome a race. Should the request need a new connection, the
   * limit comes back after 5 s, so the test fails instead of hanging.
   */
  async function starved<T>(fn: () => Promise<T>): Promise<T> {
    setSoftOpenFileLimit(pid(), await settledFds(pid()));
    const rescue = setTimeout(() => setSoftOpenFileLimit(pid(), hardOpenFileLimit()), 5_000);
    try {
      return await fn();
    } finally {
      clearTimeout(rescue);
      setSoftOpenFileLimit(pid(), hardOpenFileLimit());
    }
  }

  test("an upload that cannot open its files is a retryable 503 in Chinese on the API and S3, stores nothing, and succeeds once the limit rises", async () => {
    const png = await makePng(60, 40, 7);
    const rows = imageRows(server.dataDir);
    const refused = await starved(() => upload("starved.png", png));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(await refused.json()).toEqual({ error: "服务器同时打开的文件已达上限，暂时无法处理，请稍后重试" });
    // The operator hears what to change. (Waited for: the line comes through the server's stderr pipe,
    // which can trail the response on a busy machine.)
    await server.waitForLog(
      /level=ERROR msg="打开的文件过多，请求失败：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）" method=POST path=\/api\/upload request_id=[0-9a-f]{16} err=.*EMFILE/,
    );

    const put = await starved(() => signedRequest(f, "PUT", "/s3/kura/starved.png", { body: png }));
    expect([put.status, put.headers.get("retry-after")]).toEqual([503, "5"]);
    const xml = await put.text();
    expect([errorCodeOf(xml), errorMessageOf(xml)]).toEqual(["ServiceUnavailable", "服务器同时打开的文件已达上限，暂时无法处理，请稍后重试"]);
    await server.waitForLog(/level=ERROR msg="打开的文件过多，请求失败：.*" method=PUT path=\/s3\/kura\/starved.png request_id=[0-9a-f]{16} err=.*EMFILE/);

    expect(imageRows(server.dataDir)).toBe(rows);
    expect(tmpLeft(server.dataDir)).toEqual([]);
    expect((await upload("after.png", png)).status).toBe(200);
    expect((await signedRequest(f, "PUT", "/s3/kura/after.png", { body: png })).status).toBe(200);
    expect(imageRows(server.dataDir)).toBe(rows + 2);
  });

  test("a variant whose render found no descriptor is rendered by the next request once they are back, not served as the original for ten minutes", async () => {
    const res = await upload("variant.png", await makePng(400, 300, 11));
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    const variant = () => fetch(server.url(`/i/${id}?w=320&format=webp`));
    // On the connection the upload opened (no new one to accept), with no descriptor at all:
    // libvips cannot open the original, which it reports as an unreadable image.
    setSoftOpenFileLimit(pid(), await settledFds(pid()));
    const rescue = setTimeout(() => setSoftOpenFileLimit(pid(), hardOpenFileLimit()), 5_000);
    let starvedAnswer: [number, string | null, string];
    try {
      const res = await variant();
      starvedAnswer = [res.status, res.headers.get("retry-after"), await res.text()];
    } finally {
      clearTimeout(rescue);
      setSoftOpenFileLimit(pid(), hardOpenFileLimit());
    }
    // Nor the original either (it cannot be opened): the server's retryable trouble, not "no healthy channel".
    expect(starvedAnswer).toEqual([503, "5", "服务器同时打开的文件已达上限，暂时无法处理，请稍后重试"]);
    await server.waitForLog(/level=ERROR msg="打开的文件过多，请求失败：.*" method=GET path=\/i\/\w+ request_id=[0-9a-f]{16} err=/);
    // The local disk's failed read is told as what it is, not as a network error.
    expect(server.logs).toMatch(/msg=从存储渠道读取失败，切换到下一个 channel=local blob=\d+ err="打开的文件过多：请提高进程的文件描述符上限/);
    const after = await variant();
    expect([after.status, after.headers.get("content-type")]).toEqual([200, "image/webp"]);
    expect((await sharp(Buffer.from(await after.arrayBuffer())).metadata()).width).toBe(320);
  });

  test("connections beyond the limit wait in the backlog, and every one is answered as descriptors free up", async () => {
    const { hostname, port } = new URL(server.base);
    const spare = 8;
    const limit = (await settledFds(pid())) + spare;
    setSoftOpenFileLimit(pid(), limit);
    // Thirty requests with their heads unfinished: the server can hold only `spare` of them.
    const clients = await Promise.all(
      Array.from({ length: 30 }, async () => {
        let got = "";
        let closed!: () => void;
        const done = new Promise<void>((resolve) => (closed = resolve));
        const socket = await Bun.connect({
          hostname,
          port: Number(port),
          socket: {
            data(_socket, chunk) {
              got += chunk.toString();
            },
            close() {
              closed();
            },
            error() {},
          },
        });
        socket.write(`GET /healthz HTTP/1.1\r\nHost: ${hostname}\r\n`);
        return { socket, done, status: () => got.split("\r\n")[0] };
      }),
    );
    // The server holds as many as its limit allows; the rest wait unaccepted.
    for (let i = 0; i < 100 && openDescriptors(pid()) < limit; i++) await Bun.sleep(20);
    expect(openDescriptors(pid())).toBe(limit);
    // Each head is finished; answered connections close and make room for the next.
    for (const c of clients) c.socket.write("Connection: close\r\n\r\n");
    await Promise.all(clients.map((c) => c.done));
    setSoftOpenFileLimit(pid(), hardOpenFileLimit());
    expect(clients.map((c) => c.status())).toEqual(Array.from({ length: 30 }, () => "HTTP/1.1 200 OK"));
    expect(server.proc.exitCode).toBeNull();
  });
});

test("a start under a low descriptor limit is warned about, with the limit and what to set", async () => {
  const low = await KuraServer.start({ wrap: ["prlimit", "--nofile=1024:1024"] });
  try {
    expect(low.logs).toMatch(/level=WARN msg="进程的文件描述符上限偏低.*limit=1024 recommended=65536/);
  } finally {
    await low.dispose();
  }
  // This machine's own limit (Bun raises the soft limit to it), when it is not low itself.
  if (hardOpenFileLimit() < 8192) return;
  const normal = await KuraServer.start();
  try {
    expect(normal.logs).not.toContain("文件描述符上限偏低");
  } finally {
    await normal.dispose();
  }
});
