/**
 * Google Drive, Dropbox and OneDrive folder walks against a provider whose listing is broken (channel
 * audit 3: H1, M1, L1, L2, M4): a fetch wrapper answers the walk's list calls itself, the fakes
 * of test/channels/fakes answer everything else. A listing without `files` / `entries` fails
 * instead of reading as an empty folder; a repeated page token, a long run of empty pages and
 * endless folder depth fail after a bounded number of requests; entries are yielded page by
 * page, before the listing ends. (Each endless answer ends after a while, so that a walk without
 * the guards finishes with the wrong result instead of hanging the file.)
 */
import { afterAll, describe, expect, test } from "bun:test";
import type { Driver } from "../../src/channels/driver.ts";
import { createDriveDriver } from "../../src/channels/drivers/drive.ts";
import { channelErrorText } from "../../src/channels/drivers/driver-errors.ts";
import { createDropboxDriver } from "../../src/channels/drivers/dropbox.ts";
import { createOnedriveDriver } from "../../src/channels/drivers/onedrive.ts";
import { oauthHookOptions } from "../../src/channels/factory.ts";
import type { OAuthDriverOptions } from "../../src/channels/oauth/driver-kit.ts";
import { FakeDrive, FOLDER } from "./fakes/drive.ts";
import { FakeDropbox } from "./fakes/dropbox.ts";
import { FakeOnedrive } from "./fakes/onedrive.ts";
import { oauthAppConfig } from "./fakes/oauth.ts";
import { errorOf } from "../helpers/rejection";

const drive = new FakeDrive();
const dropbox = new FakeDropbox();
const onedrive = new FakeOnedrive();
afterAll(() => {
  drive.stop();
  dropbox.stop();
  onedrive.stop();
});
const onedriveConfig = () => ({ ...oauthAppConfig(onedrive), drive_id: onedrive.driveId, drive_type: "personal" });

/** The walk's list calls (not Drive's name lookups), with the request's page token or cursor. */
type ListAnswer = (n: number, token: string | undefined) => unknown;

interface Provider {
  name: string;
  label: string;
  /** A driver whose walk's list calls `answer` answers (the n-th call, 1-based), counting them. */
  make(answer?: ListAnswer, opts?: OAuthDriverOptions): { driver: Driver; calls: () => number };
  /** A page of `files` named entries with `more` naming the next page's token. */
  page(names: string[], more?: string, folder?: boolean): unknown;
  /** A plain driver of this provider with `opts`. */
  build(opts: OAuthDriverOptions): Driver;
}

function intercepting(isList: (url: URL, body: string) => string | undefined | false, answer: ListAnswer | undefined) {
  let calls = 0;
  const fetchFn = async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    const token = answer ? isList(url, typeof init?.body === "string" ? init.body : "") : false;
    if (token === false || !answer) return fetch(input, init);
    return Response.json(answer(++calls, token));
  };
  return { fetchFn: fetchFn as typeof fetch, calls: () => calls };
}

const providers: Provider[] = [
  {
    name: "drive",
    label: "Google Drive",
    make(answer, opts = {}) {
      const { fetchFn, calls } = intercepting((url) => {
        const q = url.searchParams.get("q") ?? "";
        return url.pathname === "/drive/v3/files" && q !== "" && !q.startsWith("name =") ? (url.searchParams.get("pageToken") ?? undefined) : false;
      }, answer);
      return { driver: createDriveDriver(oauthAppConfig(drive), { apiBase: drive.origin, fetch: fetchFn, ...opts }), calls };
    },
    build: (opts) => createDriveDriver(oauthAppConfig(drive), opts),
    page: (names, more, folder = false) => ({
      files: names.map((name, i) => (folder ? { id: `f${name}${i}`, name, mimeType: FOLDER } : { id: `${name}${i}`, name, mimeType: "image/png", size: "1" })),
      ...(more === undefined ? {} : { nextPageToken: more }),
    }),
  },
  {
    name: "dropbox",
    label: "Dropbox",
    make(answer, opts = {}) {
      const { fetchFn, calls } = intercepting((url, body) => {
        if (url.pathname === "/2/files/list_folder") return undefined;
        if (url.pathname === "/2/files/list_folder/continue") return (JSON.parse(body) as { cursor: string }).cursor;
        return false;
      }, answer);
      return { driver: createDropboxDriver(oauthAppConfig(dropbox), { apiBase: dropbox.origin, fetch: fetchFn, ...opts }), calls };
    },
    build: (opts) => createDropboxDriver(oauthAppConfig(dropbox), opts),
    page: (names, more, folder = false) => ({
      entries: names.map((name) => (folder ? { ".tag": "folder", name } : { ".tag": "file", name, size: 1 })),
      cursor: more ?? "end",
      has_more: more !== undefined,
    }),
  },
  {
    name: "onedrive",
    label: "OneDrive",
    make(answer, opts = {}) {
      const { fetchFn, calls } = intercepting(
        (url) => (url.pathname.endsWith("/children") ? (url.searchParams.get("$skiptoken") ?? undefined) : false),
        answer,
      );
      return { driver: createOnedriveDriver(onedriveConfig(), { apiBase: onedrive.origin, fetch: fetchFn, ...opts }), calls };
    },
    page: (names, more, folder = false) => ({
      value: names.map((name) => (folder ? { name, folder: {} } : { name, size: 1, file: {} })),
      ...(more === undefined ? {} : { "@odata.nextLink": `${onedrive.origin}/v1.0/drives/${onedrive.driveId}/root/children?$skiptoken=${more}` }),
    }),
    build: (opts) => createOnedriveDriver(onedriveConfig(), opts),
  },
];

async function listAll(driver: Driver, prefix = ""): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of driver.list(prefix)) keys.push(info.key);
  return keys;
}

for (const p of providers) {
  describe(`${p.name}: broken listings`, () => {
    test("an answer without the listing's fields is an invalid listing, not an empty folder (M1, L1)", async () => {
      const spoiled: [unknown, string][] = [
        [{}, { drive: "缺少 files 数组", dropbox: "缺少 entries 数组", onedrive: "缺少 value 数组" }[p.name]!],
        [null, "不是 JSON 对象"],
        ...(
          {
            drive: [
              [{ files: "x" }, "缺少 files 数组"],
              [{ files: [{ name: "a" }] }, "中有无效的条目"],
            ],
            dropbox: [
              [{ entries: {}, cursor: "c", has_more: false }, "缺少 entries 数组"],
              [{ entries: [{ name: "a" }], cursor: "c", has_more: false }, "中有无效的条目"],
            ],
            onedrive: [
              [{ value: {} }, "缺少 value 数组"],
              [{ value: [{ size: 1 }] }, "中有无效的条目"],
              [{ value: [], "@odata.nextLink": 7 }, "@odata.nextLink 不是字符串"],
            ],
          } as Record<string, [unknown, string][]>
        )[p.name]!,
      ];
      if (p.name === "dropbox") spoiled.push([{ entries: [], cursor: "c", has_more: "false" }, "has_more 不是布尔值"]);
      if (p.name === "dropbox") spoiled.push([{ entries: [], has_more: true }, "缺少 cursor"]);
      for (const [answer, why] of spoiled) {
        const err = await errorOf(listAll(p.make(() => answer).driver));
        expect(err.message).toStartWith(`${p.label} 列表响应格式无效：`);
        expect(err.message).toContain(why);
        // What reaches last_error and alerts is that reason, not "与存储服务通信失败".
        expect(channelErrorText(err)).toBe(err.message);
      }
    });

    test("a repeated page token fails on its first repeat (H1)", async () => {
      const { driver, calls } = p.make((n) => p.page(["a.png"], n < 100 ? "same" : undefined));
      const err = await errorOf(listAll(driver));
      expect(err.message).toBe(`${p.label} 列表响应格式无效：分页没有进展（重复的续传标记）`);
      expect(calls()).toBe(2);
    });

    test("entries are yielded page by page, before the listing ends (H1)", async () => {
      const { driver, calls } = p.make((n) => p.page([`f${n}.png`], n < 200 ? `t${n}` : undefined));
      const seen: string[] = [];
      for await (const info of driver.list("")) {
        seen.push(info.key);
        if (seen.length === 3) break;
      }
      expect(seen).toEqual(["f1.png", "f2.png", "f3.png"]);
      expect(calls()).toBe(3);
    });

    test("a long run of empty pages that claim more: a thousand are allowed, then it fails (H1)", async () => {
      const { driver, calls } = p.make((n) => p.page([], n < 5000 ? `t${n}` : undefined));
      const err = await errorOf(listAll(driver));
      expect(err.message).toBe(`${p.label} 列表响应格式无效：连续 1000 页没有条目，分页没有进展`);
      expect(calls()).toBe(1001);
    });

    test("folders nested without end fail below 32 levels (H1)", async () => {
      const { driver, calls } = p.make((n) => p.page(n < 100 ? ["d"] : [], undefined, true));
      const err = await errorOf(listAll(driver));
      expect(err.message).toBe(`${p.label} 列表响应格式无效：文件夹层级超过 32 层（可能是循环的文件夹结构）`);
      expect(calls()).toBe(33);
    });

    test("KURA_CHANNEL_TIMEOUT_MS reaches the driver: a stalled answer fails within it, not after 60 s (M4)", async () => {
      const stall = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
      try {
        const opts = { ...oauthHookOptions({ peerTimeoutMs: 300 }, p.name as "drive" | "dropbox" | "onedrive"), apiBase: `http://127.0.0.1:${stall.port}` };
        const driver = p.build(opts);
        const started = performance.now();
        const err = await errorOf(driver.head("a.png"));
        expect(err.message).toContain("请求超时");
        expect(performance.now() - started).toBeLessThan(10_000);
      } finally {
        stall.stop(true);
      }
    }, 30_000);
  });
}

test("drive: a resumable session on another origin gets no token and fails (L2)", async () => {
  const other = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(null, { status: 200 }) });
  const seen: { url: string; authorization: string | null }[] = [];
  const fetchFn = async (input: string | URL | Request, init?: RequestInit) => {
    const url = String(input instanceof Request ? input.url : input);
    seen.push({ url, authorization: new Headers(init?.headers).get("authorization") });
    const res = await fetch(input, init);
    const location = res.headers.get("location");
    if (!location?.includes("upload_id=")) return res;
    // The session named on `localhost` (another origin than the API's 127.0.0.1).
    const moved = location.replace(drive.origin, `http://localhost:${other.port}`);
    return new Response(null, { status: res.status, headers: { location: moved } });
  };
  try {
    const config = { ...oauthAppConfig(drive), upload_cutoff: "1k" };
    const driver = createDriveDriver(config, { apiBase: drive.origin, fetch: fetchFn as typeof fetch });
    const err = await errorOf(driver.put("l2/a.bin", new Uint8Array(4096), 4096));
    expect(err.message).toBe("Google Drive 的续传会话地址不在接口的主机上，已拒绝（不会发送授权令牌）");
    expect(seen.filter((r) => r.url.includes("localhost"))).toEqual([]);
    // The same upload with the API's own session address goes through.
    await createDriveDriver(config, { apiBase: drive.origin }).put("l2/a.bin", new Uint8Array(4096), 4096);
  } finally {
    other.stop(true);
  }
});
