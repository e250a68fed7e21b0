/**
 * Streamed uploads that go wrong (a body that ends inside the file part, a body over the cap,
 * a client that hangs up, a bad `object_key` after the file arrived) on every upload route:
 * the process lives on, the client gets its error, and nothing of the upload stays behind:
 * no temp file in the data directory's `tmp/`, and no descriptor the process still holds on
 * one (an unlinked temp file whose descriptor stays open keeps its disk space until restart).
 *
 * Bodies go out chunked (no Content-Length), which is how they reach the streaming parser;
 * declared bodies of more than 4 MiB take the same path.
 */
import { expect, test } from "bun:test";
import { expectError } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { expectNoUploadLeftovers, openTempFiles } from "../helpers/leftovers";
import { settled } from "../helpers/settle";

const { server, admin } = useAdmin();
const BOUNDARY = "kurastreamfault";
const CAP_MB = 1;

interface Route {
  path: string;
  field: string;
  headers: () => Record<string, string>;
  /** The Chinese message of an error answer, read from the route's own envelope. */
  message: (body: Record<string, unknown>) => unknown;
  /** Lsky answers every refusal but 401 and 429 with HTTP 200 and status false. */
  refusedWith?: number;
}

let token = "";
/** Kura's own envelope: exactly `{ "error": "…" }`. */
const kuraMessage = (b: Record<string, unknown>) => Object.keys(b).length === 1 && b.error;
const routes: Route[] = [
  { path: "/api/admin/upload", field: "file", headers: () => ({ cookie: admin.cookie, "x-csrf-token": admin.csrf }), message: kuraMessage },
  { path: "/api/upload", field: "file", headers: () => ({ authorization: `Bearer ${token}` }), message: kuraMessage },
  // Lsky Pro's envelope: { status: false, message, data }.
  {
    path: "/api/v1/upload",
    field: "file",
    headers: () => ({ authorization: `Bearer ${token}` }),
    message: (b) => b.status === false && b.message,
    refusedWith: 200,
  },
  // Unauthenticated on purpose: Chevereto's key may come inside the form, so the form is read first.
  { path: "/api/1/upload", field: "source", headers: () => ({}), message: (b) => (b.error as { message?: string } | undefined)?.message },
];

const partHead = (field: string) =>
  new TextEncoder().encode(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n`);

/** A chunked body: the given pieces, then either the end of the body or (with `hang`) silence. */
function chunked(pieces: Uint8Array[], hang = false): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      if (!hang) controller.close();
    },
  });
}

function post(route: Route, body: ReadableStream<Uint8Array>, signal?: AbortSignal, extra: Record<string, string> = {}) {
  return fetch(server.url(route.path), {
    method: "POST",
    headers: { ...route.headers(), ...extra, "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    body,
    signal,
    duplex: "half",
  } as RequestInit);
}

async function expectNothingLeft() {
  await expectNoUploadLeftovers(server);
  expect((await fetch(server.url("/healthz"))).status).toBe(200);
}

async function expectStatus(res: Response, route: Route, status: number) {
  const text = await res.text();
  expect(`${res.status} ${text}`).toStartWith(`${route.refusedWith ?? status} `);
  expect(String(route.message(JSON.parse(text)))).toMatch(/[\u4e00-\u9fff]/);
}

test("setup: a 1 MiB cap and an upload token", async () => {
  await admin.json("PUT", "/api/admin/config", { max_upload_mb: CAP_MB });
  token = (await admin.json<{ token: string }>("POST", "/api/admin/tokens", { name: "stream-faults" }, 201)).token;
  expect(token).toStartWith("kura_");
});

for (const route of routes) {
  test(`${route.path}: a body that ends inside the file part is a 400, and the server lives on`, async () => {
    const pid = server.proc.pid;
    const res = await post(route, chunked([partHead(route.field), new TextEncoder().encode("hello\r\n")]));
    await expectStatus(res, route, 400);
    // The same process still answers: before, the file part's unheard stream error ended it.
    await Bun.sleep(200);
    expect(server.proc.exitCode).toBeNull();
    expect(server.proc.pid).toBe(pid);
    await expectNothingLeft();
  });

  test(`${route.path}: a body over the cap is a 413, and its temp file is closed and gone`, async () => {
    const over = new Uint8Array(CAP_MB * 1024 * 1024 + 256 * 1024).fill(0x41);
    const res = await post(route, chunked([partHead(route.field), over, new TextEncoder().encode(`\r\n--${BOUNDARY}--\r\n`)]));
    await expectStatus(res, route, 413);
    await expectNothingLeft();
  });

  test(`${route.path}: a client that hangs up mid-file leaves no temp file and no open descriptor`, async () => {
    const abort = new AbortController();
    const answer = post(route, chunked([partHead(route.field), new Uint8Array(256 * 1024).fill(0x42)], true), abort.signal).catch((e: Error) => e);
    // The temp file exists (and is open) once the first bytes of the file part were written.
    const opened = await settled(
      async () => openTempFiles(server),
      (open) => open.length > 0,
    );
    expect(opened.length).toBe(1);
    abort.abort();
    expect(await answer).toBeInstanceOf(Error);
    await expectNothingLeft();
  });
}

const badFields: Array<[field: string, value: string, named: string]> = [
  ["object_key", "../x.png", "object_key"],
  ["ttl", "soon", "ttl"],
  ["exif_policy", "blur", "exif_policy"],
];

for (const [field, value, named] of badFields) {
  test(`/api/upload: an invalid ${field} after a streamed file is a 400 and the received file is removed`, async () => {
    const enc = new TextEncoder();
    const png = new Uint8Array(300 * 1024).fill(0x43);
    const body = chunked([
      partHead("file"),
      png,
      enc.encode(`\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"\r\n\r\n${value}\r\n--${BOUNDARY}--\r\n`),
    ]);
    expect(await expectError(await post(routes[1]!, body), 400)).toContain(named);
    await expectNothingLeft();
  });
}
