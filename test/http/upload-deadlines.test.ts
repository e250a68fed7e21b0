/**
 * The upload body's idle deadline (`upload_idle_timeout_seconds`, 1 s here): on every upload route
 * and both ways a body reaches the parser (chunked, streamed to a temp file; a declared length of
 * at most 4 MiB, read into memory), a body that stops arriving is answered 408 in the route's own
 * envelope about one deadline later, the connection is closed, and nothing of the upload stays:
 * no temp file, no open descriptor, no upload slot (`max_concurrent_uploads` is 1 here, so a slot
 * kept by one case would turn the next case's 408 into a 429). Before, such a request got no
 * answer at all until Bun's idle timeout (120 s), holding its slot and temp file all along.
 * A slow but steady body passes however long it takes: only a pause counts.
 */
import { expect, test } from "bun:test";
import sharp from "sharp";
import { useAdmin } from "../helpers/fixture";
import { expectNoUploadLeftovers } from "../helpers/leftovers";
import { settled } from "../helpers/settle";
import { chunk, MULTIPART, partHead, RawRequest, textPart, type RawAnswer } from "./raw-upload.helpers";

const { server, admin } = useAdmin();
const IDLE_S = 1;
let token = "";

/** Kura's own envelope, Lsky's and Chevereto's: the Chinese message of an error answer. */
const kura = (b: Record<string, unknown>) => (Object.keys(b).length === 1 ? b.error : undefined);
const lsky = (b: Record<string, unknown>) => (b.status === false ? b.message : undefined);
const chevereto = (b: Record<string, unknown>) => (b.status_code === 408 ? (b.error as { message?: unknown }).message : undefined);

interface Case {
  name: string;
  path: string;
  headers: () => string[];
  type: string;
  /** The body bytes sent before the silence. */
  first: () => string | Uint8Array;
  message: (body: Record<string, unknown>) => unknown;
  /** The answer's HTTP status when it is not 408: Lsky answers refusals with 200 and status false. */
  status?: number;
}

const fileStart = (field: string) => Buffer.concat([Buffer.from(partHead(field, "x.png")), Buffer.alloc(300 * 1024, 0x42)]);
const cases: Case[] = [
  {
    name: "console upload",
    path: "/api/admin/upload",
    headers: () => [`Cookie: ${admin.cookie}`, `X-CSRF-Token: ${admin.csrf}`],
    type: MULTIPART,
    first: () => fileStart("file"),
    message: kura,
  },
  {
    name: "token upload",
    path: "/api/upload",
    headers: () => [`Authorization: Bearer ${token}`],
    type: MULTIPART,
    first: () => fileStart("file"),
    message: kura,
  },
  {
    name: "Lsky upload",
    path: "/api/v1/upload",
    headers: () => [`Authorization: Bearer ${token}`],
    type: MULTIPART,
    first: () => fileStart("file"),
    message: lsky,
    status: 200,
  },
  {
    name: "Chevereto, key in the header",
    path: "/api/1/upload",
    headers: () => [`X-API-Key: ${token}`],
    type: MULTIPART,
    first: () => fileStart("source"),
    message: chevereto,
  },
  {
    name: "Chevereto, key first in the form",
    path: "/api/1/upload",
    headers: () => [],
    type: MULTIPART,
    first: () => Buffer.concat([Buffer.from(textPart("key", token)), fileStart("source")]),
    message: chevereto,
  },
  { name: "Chevereto, no key yet", path: "/api/1/upload", headers: () => [], type: MULTIPART, first: () => fileStart("source"), message: chevereto },
  {
    name: "Chevereto urlencoded, key in the header",
    path: "/api/1/upload",
    headers: () => [`X-API-Key: ${token}`],
    type: "application/x-www-form-urlencoded",
    first: () => `source=${"QUJD".repeat(20_000)}`,
    message: chevereto,
  },
  {
    name: "Chevereto urlencoded, key last",
    path: "/api/1/upload",
    headers: () => [],
    type: "application/x-www-form-urlencoded",
    first: () => `format=json&source=${"QUJD".repeat(20_000)}`,
    message: chevereto,
  },
];

const expectNothingLeft = () => expectNoUploadLeftovers(server);

/** Sends the head and the first bytes, then nothing; returns the answer if one comes within 10 s. */
async function stall(c: Case, framing: "chunked" | "declared"): Promise<{ answer: RawAnswer | null | undefined; req: RawRequest }> {
  const first = Buffer.from(c.first());
  const length = framing === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${first.length + 100_000}`;
  const head = [`POST ${c.path} HTTP/1.1`, "Host: 127.0.0.1", `Content-Type: ${c.type}`, length, ...c.headers()].join("\r\n");
  const req = await RawRequest.open(server, head, framing === "chunked" ? chunk(first) : first);
  // Ten deadlines: long enough for a loaded machine, far below Bun's 120 s idle timeout.
  return { answer: await req.within(10 * IDLE_S * 1000), req };
}

test("setup: a 1 s idle deadline, one upload slot, an upload token", async () => {
  await admin.json("PUT", "/api/admin/config", { upload_idle_timeout_seconds: IDLE_S, max_concurrent_uploads: 1 });
  token = (await admin.json<{ token: string }>("POST", "/api/admin/tokens", { name: "deadlines" }, 201)).token;
  expect(token).toStartWith("kura_");
});

for (const c of cases) {
  for (const framing of ["chunked", "declared"] as const) {
    test(`${c.name} (${c.path}, ${framing}): a body that stops arriving is ${c.status ?? 408} after the deadline, and nothing stays`, async () => {
      const { answer, req } = await stall(c, framing);
      try {
        expect(answer, "no answer within 10 s").toBeTruthy();
        expect(`${answer!.status} ${answer!.body}`).toStartWith(`${c.status ?? 408} `);
        expect(String(c.message(JSON.parse(answer!.body)))).toContain("上传数据中断");
        // Not before the deadline: the silence is what is judged.
        expect(answer!.ms).toBeGreaterThanOrEqual(IDLE_S * 1000 - 50);
        expect(answer!.headers.connection).toBe("close");
        expect((await settled(async () => req.closed, Boolean)) && "closed").toBe("closed");
      } finally {
        req.destroy();
      }
      await expectNothingLeft();
    });
  }
}

test("a slow but steady upload passes however long it takes; one pause longer than the deadline is a 408", async () => {
  // Noise, so the PNG is large enough to send in many pieces.
  const pixels = new Uint8Array(160 * 160 * 3).map((_, i) => (i * 7919) % 251);
  const png = await sharp(pixels, { raw: { width: 160, height: 160, channels: 3 } })
    .png()
    .toBuffer();
  const body = Buffer.concat([Buffer.from(partHead("file", "slow.png")), png, Buffer.from(`\r\n--kuraslowbody--\r\n`)]);
  const pieces = 12;
  const size = Math.ceil(body.length / pieces);
  const send = async (pauseAt: number) => {
    const head = [
      "POST /api/upload HTTP/1.1",
      "Host: 127.0.0.1",
      `Content-Type: ${MULTIPART}`,
      `Content-Length: ${body.length}`,
      `Authorization: Bearer ${token}`,
    ];
    const req = await RawRequest.open(server, head.join("\r\n"));
    try {
      for (let i = 0; i < pieces && !req.closed; i++) {
        // 0.3 s between pieces: 3.6 s in all, more than three deadlines.
        await Bun.sleep(i === pauseAt ? IDLE_S * 1000 + 500 : 300);
        req.send(body.subarray(i * size, (i + 1) * size));
      }
      return await req.within(10_000);
    } finally {
      req.destroy();
    }
  };
  const steady = await send(-1);
  expect(`${steady?.status} ${steady?.body}`).toStartWith("200 ");
  expect(steady!.ms).toBeGreaterThan(3 * IDLE_S * 1000);
  const paused = await send(6);
  expect(`${paused?.status} ${paused?.body}`).toStartWith("408 ");
  await expectNothingLeft();
});
