/**
 * The guards on what a channel read yields: a driver result never yields more or fewer bytes
 * than the size it declares (wholeResult, partialResult, rangedResult), and a whole blob is
 * checked against its SHA-256 with the completing chunk withheld until the digest matched.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { channelErrorText } from "../../src/channels/drivers/driver-errors";
import { partialResult, wholeResult } from "../../src/channels/drivers/http-range";
import { rangedResult } from "../../src/channels/oauth/ranged";
import { ContentMismatchError, verifiedStream } from "../../src/images/verify";

const bytes = (n: number, fill = 7) => new Uint8Array(n).fill(fill);

/** A stream of `parts`, counting how many of them were pulled (an endless one never closes). */
function source(parts: Uint8Array[], endless?: Uint8Array) {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const part = parts.shift() ?? endless;
      state.pulled++;
      if (part) controller.enqueue(part);
      else controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

/** What a consumer gets: the bytes that came through (up to 1 MiB), and the error that ended it, if any. */
async function drain(stream: ReadableStream<Uint8Array>): Promise<{ got: number; error?: Error }> {
  const reader = stream.getReader();
  let got = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { got };
      got += value.byteLength;
      // An unguarded endless body would never end: give up where no guarded one gets.
      if (got > 1024 * 1024) return { got, error: new Error("unbounded") };
    }
  } catch (error) {
    return { got, error: error as Error };
  }
}

describe("driver results are held to their declared size", () => {
  test("wholeResult: a longer body errors before the extra bytes pass", async () => {
    const out = await drain(wholeResult(source([bytes(10), bytes(10)]).stream, 10, undefined, "WebDAV").stream);
    expect(out.got).toBe(10);
    expect(out.error?.message).toMatch(/WebDAV 返回的数据比对象大小 10 字节更长/);
  });

  test("wholeResult: an endless body stops one chunk past the size", async () => {
    const { stream, state } = source([], bytes(64 * 1024));
    const out = await drain(wholeResult(stream, 1000).stream);
    expect(out.error).toBeDefined();
    expect(state.pulled).toBeLessThan(4);
    await Bun.sleep(10); // the pipe cancels its source a few ticks after the error
    expect(state.cancelled).toBe(true);
  });

  test("wholeResult: a short body errors at its end; an exact one passes", async () => {
    expect((await drain(wholeResult(source([bytes(9)]).stream, 10).stream)).error?.message).toMatch(/不完整/);
    expect(await drain(wholeResult(source([bytes(4), bytes(6)]).stream, 10).stream)).toEqual({ got: 10 });
  });

  test("wholeResult with a range a server ignored: the slice, and still bounded by the whole size", async () => {
    const sliced = wholeResult(source([bytes(10)]).stream, 10, { start: 2, end: 4 });
    expect(await drain(sliced.stream)).toEqual({ got: 3 });
    const { stream, state } = source([], bytes(64 * 1024));
    expect((await drain(wholeResult(stream, 10, { start: 2, end: 4 }).stream)).error).toBeDefined();
    expect(state.cancelled).toBe(true);
  });

  test("partialResult: a 206 body longer than its Content-Range errors", async () => {
    const got = await partialResult(source([bytes(20)]).stream, "bytes 0-9/100", { start: 0, end: 9 }, "WebDAV");
    expect((await drain(got.stream)).error?.message).toMatch(/更长/);
  });

  test("rangedResult: a 206 whose total leaves nothing of the range asked for is refused naming the drive, its body cancelled", () => {
    const { stream, state } = source([bytes(10)]);
    const shrunk = new Response(stream, { status: 206, headers: { "content-range": "bytes 50-59/40" } });
    expect(() => rangedResult(shrunk, { start: 50, end: 59 }, "OneDrive")).toThrow("OneDrive 返回的范围与请求不符 (Content-Range 无效)");
    expect(state.cancelled).toBe(true);
  });

  test("rangedResult: a body without Content-Length is held to the metadata size (Dropbox's header)", async () => {
    const longer = new Response(source([bytes(10), bytes(10)]).stream);
    const got = rangedResult(longer, undefined, "Dropbox", 10);
    expect(got.size).toBe(10);
    const out = await drain(got.stream);
    expect(out.got).toBe(10);
    expect(out.error?.message).toMatch(/Dropbox 返回的数据比对象大小 10 字节更长/);
  });
});

describe("verifiedStream", () => {
  const body = new Uint8Array(3000).map((_, i) => i % 251);
  const sha = createHash("sha256").update(body).digest("hex");

  test("the right bytes pass whole and are marked verified", async () => {
    const read = verifiedStream(source([body.subarray(0, 1000), body.subarray(1000)]).stream, sha, body.length);
    expect(read.verified()).toBe(false);
    expect(await drain(read.stream)).toEqual({ got: 3000 });
    expect(read.verified()).toBe(true);
  });

  test("wrong bytes: the completing chunk is withheld, so no consumer ever holds the whole wrong body", async () => {
    const wrong = body.slice();
    wrong[5] ^= 1;
    let mismatches = 0;
    const read = verifiedStream(source([wrong.subarray(0, 1000), wrong.subarray(1000)]).stream, sha, body.length, () => mismatches++);
    const out = await drain(read.stream);
    expect(out.got).toBe(1000);
    expect(out.error).toBeInstanceOf(ContentMismatchError);
    expect(out.error?.message).toMatch(/SHA-256 不符/);
    expect(read.verified()).toBe(false);
    expect(mismatches).toBe(1);
  });

  test("a longer body errors before its extra bytes; a shorter one at its end; neither counts as a mismatch", async () => {
    let mismatches = 0;
    const longer = await drain(verifiedStream(source([body, bytes(1)]).stream, sha, body.length, () => mismatches++).stream);
    expect(longer).toMatchObject({ got: 3000 });
    expect(longer.error?.message).toMatch(/更长/);
    const shorter = await drain(verifiedStream(source([body.subarray(0, 2999)]).stream, sha, body.length, () => mismatches++).stream);
    expect(shorter.error?.message).toMatch(/不完整/);
    expect(mismatches).toBe(0);
  });
});

describe("channelErrorText: what reaches last_error, alerts, webhooks and the log", () => {
  test("Kura's own Chinese messages pass unchanged", () => {
    expect(channelErrorText(new Error("WebDAV 连接失败: 连接被重置"))).toBe("WebDAV 连接失败: 连接被重置");
  });

  test("the runtime's English becomes a Chinese description without internals", () => {
    const reset = Object.assign(
      new Error("The socket connection was closed unexpectedly. For more information, pass `verbose: true` in the second argument to fetch()"),
      {
        code: "ECONNRESET",
      },
    );
    expect(channelErrorText(reset)).toBe("与存储服务通信失败: 连接被重置");
    expect(channelErrorText(new SyntaxError("JSON Parse error: Unexpected EOF"))).toMatch(/^存储服务的响应格式无效/);
    expect(channelErrorText(new RangeError("Out of memory"))).toMatch(/内存不足/);
    expect(channelErrorText(new TypeError("undefined is not an object (evaluating 'x.y')"))).toBe("与存储服务通信失败");
    expect(channelErrorText("weird")).toBe("与存储服务通信失败");
  });

  test("a local disk's file-system error says what is wrong, not 'network error', and not the path (the channel's directory)", () => {
    const fsError = (code: string, syscall = "open") =>
      Object.assign(new Error(`${code}: failed, ${syscall} '/srv/kura/storage/img/a.png'`), { code, syscall, path: "/srv/kura/storage/img/a.png" });
    expect(channelErrorText(fsError("EMFILE"))).toBe("打开的文件过多：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=） (EMFILE)");
    expect(channelErrorText(fsError("EACCES"))).toBe("本地存储读写失败: 没有权限 (EACCES)");
    expect(channelErrorText(fsError("EIO", "read"))).toBe("本地存储读写失败: 磁盘 I/O 错误 (EIO)");
    // A network code is still the network's.
    expect(channelErrorText(Object.assign(new Error("connect failed"), { code: "ECONNREFUSED" }))).toBe("与存储服务通信失败: 连接被拒绝");
  });
});
