/**
 * Two small parsers, rule by rule (each table row names its rule):
 *
 * - src/channels/drivers/http-range.ts: the `Range` header a driver sends, and the answer turned
 *   into the part asked for. A 206 must carry `bytes S-E/T` with S the start asked for and E at
 *   least the end asked for (clamped to T): more at the end is cut down, anything else refused
 *   naming the driver; a 200 that ignored Range has the part cut out; either way the body is held
 *   to the length the answer declared. Property: on random objects, ranges, answers and chunkings
 *   the bytes are the object's slice.
 * - src/cli/args.ts: the `kura` command line, all checked before any command runs: help first,
 *   `--version`, unknown commands and options, each command's argument count, blank arguments,
 *   and `--` after which anything (even `-bob` or `--help`) is an argument. Property: after `--`
 *   words are taken verbatim, only counted and checked for blanks.
 *
 * test/unit/read-guards.test.ts has the drivers' size guards on endless bodies;
 * test/deploy/cli-arguments.test.ts runs the real binary.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { partialResult, rangeHeader, sizedPart, wholeResult } from "../../src/channels/drivers/http-range";
import type { ByteRange, GetResult } from "../../src/channels/driver";
import { parseCommandLine, USAGE } from "../../src/cli/args";

// --- http-range ---------------------------------------------------------------------------------

/** The object every answer below is a part of: byte i is i % 251. */
const OBJECT = Uint8Array.from({ length: 100 }, (_, i) => i % 251);

/** A body of `chunks`, noting whether its reader cancelled it. */
function body(chunks: Uint8Array[]) {
  const state = { cancelled: false };
  const queue = [...chunks];
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const chunk = queue.shift();
      if (chunk) controller.enqueue(chunk);
      else controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

/** What a consumer reads: the bytes that came through, and the message of the error that ended them, if any. */
async function drain(result: GetResult): Promise<{ size: number; totalSize: number; bytes: number[]; error: string | null }> {
  const bytes: number[] = [];
  const reader = result.stream.getReader();
  let error: string | null = null;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes.push(...value);
    }
  } catch (err) {
    error = (err as Error).message;
  }
  return { size: result.size, totalSize: result.totalSize, bytes, error };
}
const slice = (start: number, end: number) => [...OBJECT.subarray(start, end + 1)];

describe("the Range header", () => {
  test.each([
    ["a closed range", { start: 5, end: 9 }, "bytes=5-9"],
    ["a single byte", { start: 0, end: 0 }, "bytes=0-0"],
    ["an open range: to the end", { start: 100 }, "bytes=100-"],
  ])("%s", (_rule, range, header) => {
    expect(rangeHeader(range)).toBe(header);
  });
});

describe("a 206 answer (partialResult)", () => {
  test.each([
    ["the part asked for", { start: 10, end: 19 }, "bytes 10-19/100", [10, 19], 10, slice(10, 19)],
    ["multi-digit positions", { start: 90, end: 99 }, "bytes 90-99/100", [90, 99], 10, slice(90, 99)],
    ["blanks around the header value", { start: 10, end: 19 }, "  bytes 10-19/100\t", [10, 19], 10, slice(10, 19)],
    ["more than asked at the end is cut down (bytes=0-0)", { start: 0, end: 0 }, "bytes 0-9/100", [0, 9], 1, slice(0, 0)],
    ["an open range runs to the object's end", { start: 90 }, "bytes 90-99/100", [90, 99], 10, slice(90, 99)],
    ["a range past the end is clamped to the object", { start: 95, end: 500 }, "bytes 95-99/100", [95, 99], 5, slice(95, 99)],
  ] as const)("accepted: %s", async (_rule, range, contentRange, [from, to], size, bytes) => {
    const { stream } = body([OBJECT.slice(from, to + 1)]);
    expect(await drain(await partialResult(stream, contentRange, range, "WebDAV"))).toEqual({ size, totalSize: 100, bytes: [...bytes], error: null });
  });

  test.each([
    ["no Content-Range", null],
    ["another unit", "items 10-19/100"],
    ["text before it", "xbytes 10-19/100"],
    ["text after it", "bytes 10-19/100x"],
    ["an unknown total", "bytes 10-19/*"],
    ["no end", "bytes 10-/100"],
    ["a later start", "bytes 11-19/100"],
    ["an earlier start (more at the front is not cut)", "bytes 0-19/100"],
    ["an end short of the one asked", "bytes 10-18/100"],
    ["an end before its start", "bytes 10-1/100"],
    ["a total that ends before the range asked for (the object shrank)", "bytes 10-19/10"],
    ["a total of nothing", "bytes 10-19/0"],
  ])("refused naming the driver, the body cancelled: %s", async (_rule, contentRange) => {
    const { stream, state } = body([OBJECT.slice(10, 20)]);
    const refusal = await partialResult(stream, contentRange, { start: 10, end: 19 }, "WebDAV").then(
      () => "accepted",
      (err: Error) => err.message,
    );
    expect([refusal, state.cancelled]).toEqual(["WebDAV 返回的范围与请求不符 (Content-Range 无效)", true]);
  });

  test.each([
    [
      "a body longer than its Content-Range errors after the part",
      [OBJECT.slice(10, 20), OBJECT.slice(20, 30)],
      slice(10, 19),
      "WebDAV 返回的数据比对象大小 10 字节更长",
    ],
    ["a body shorter than its Content-Range errors at its end", [OBJECT.slice(10, 15)], slice(10, 14), "WebDAV 返回的数据不完整: 应为 10 字节，只收到 5 字节"],
  ])("held to the Content-Range's length: %s", async (_rule, chunks, bytes, error) => {
    const got = await partialResult(body(chunks).stream, "bytes 10-19/100", { start: 10, end: 19 }, "WebDAV");
    expect(await drain(got)).toEqual({ size: 10, totalSize: 100, bytes, error });
  });

  test("a part cut down is still held to the length its Content-Range declared", async () => {
    const got = await partialResult(body([OBJECT.slice(0, 10), OBJECT.slice(10, 11)]).stream, "bytes 0-9/100", { start: 0, end: 0 }, "S3");
    expect(await drain(got)).toEqual({ size: 1, totalSize: 100, bytes: slice(0, 0), error: "S3 返回的数据比对象大小 10 字节更长" });
  });

  test("sizedPart: the part [start, end] of one that carried [start, gotEnd]", async () => {
    expect(await drain(sizedPart(body([OBJECT.slice(20, 40)]).stream, 20, 39, 29, 100, "OneDrive"))).toEqual({
      size: 10,
      totalSize: 100,
      bytes: slice(20, 29),
      error: null,
    });
  });
});

describe("an answer with the whole object (wholeResult)", () => {
  test.each([
    ["no range: all of it", undefined, 100, slice(0, 99)],
    ["a range the server ignored is cut out", { start: 2, end: 4 }, 3, slice(2, 4)],
    ["an open range the server ignored", { start: 97 }, 3, slice(97, 99)],
    ["a range past the end, clamped", { start: 98, end: 500 }, 2, slice(98, 99)],
  ] as const)("%s", async (_rule, range, size, bytes) => {
    expect(await drain(wholeResult(body([OBJECT.slice(0, 60), OBJECT.slice(60)]).stream, 100, range, "WebDAV"))).toEqual({
      size,
      totalSize: 100,
      bytes: [...bytes],
      error: null,
    });
  });

  test("held to the object's size, the default label naming the storage service", async () => {
    expect(await drain(wholeResult(body([OBJECT.slice(0, 99)]).stream, 100))).toEqual({
      size: 100,
      totalSize: 100,
      bytes: slice(0, 98),
      error: "存储服务 返回的数据不完整: 应为 100 字节，只收到 99 字节",
    });
  });

  test("a range that starts past the object is unsatisfiable (RangeError)", () => {
    expect(() => wholeResult(body([OBJECT]).stream, 100, { start: 100 })).toThrow(new RangeError("请求的范围无效: 100- (对象大小 100)"));
  });

  test("on random objects, ranges, answers and chunkings the bytes are the object's slice", async () => {
    const arbitrary = fc
      .record({
        total: fc.integer({ min: 1, max: 300 }),
        start: fc.nat(),
        length: fc.option(fc.integer({ min: 1, max: 400 }), { nil: undefined }),
        answer: fc.constantFrom("206", "206 longer", "200"),
        extra: fc.nat(),
        cuts: fc.array(fc.nat(), { maxLength: 6 }),
      })
      .map((c) => ({ ...c, start: c.start % c.total }));
    await fc.assert(
      fc.asyncProperty(arbitrary, async ({ total, start, length, answer, extra, cuts }) => {
        const object = Uint8Array.from({ length: total }, (_, i) => (i * 31 + 7) % 256);
        const range: ByteRange = length === undefined ? { start } : { start, end: start + length - 1 };
        // The reference: the object's bytes from start to the end asked for, at most to its last byte.
        const last = Math.min(range.end ?? total - 1, total - 1);
        const expected = [...object.subarray(start, last + 1)];
        // What the server sends: the part, the part and more up to a later end, or the whole object.
        const sentEnd = answer === "206" ? last : answer === "206 longer" ? last + (extra % (total - last)) : total - 1;
        const sentStart = answer === "200" ? 0 : start;
        const sent = object.subarray(sentStart, sentEnd + 1);
        const edges = [...new Set(cuts.map((n) => n % (sent.length + 1)))].sort((a, b) => a - b);
        const chunks = [...edges, sent.length].map((edge, i) => sent.slice(i ? edges[i - 1] : 0, edge));
        const { stream } = body(chunks.filter((c) => c.length > 0));
        const got =
          answer === "200" ? wholeResult(stream, total, range, "S3") : await partialResult(stream, `bytes ${sentStart}-${sentEnd}/${total}`, range, "S3");
        expect(await drain(got)).toEqual({ size: expected.length, totalSize: total, bytes: expected, error: null });
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });
});

// --- the command line ---------------------------------------------------------------------------

describe("the kura command line", () => {
  test.each([
    ["no command is serve", [], "serve", []],
    ["serve", ["serve"], "serve", []],
    ["backup", ["backup"], "backup", []],
    ["check", ["check"], "check", []],
    ["selftest", ["selftest"], "selftest", []],
    ["version", ["version"], "version", []],
    ["--version as a command is version", ["--version"], "version", []],
    ["reset-password with its default user", ["reset-password"], "reset-password", []],
    ["reset-password for a user", ["reset-password", "bob"], "reset-password", ["bob"]],
    ["help after a command is a word, not help", ["reset-password", "help"], "reset-password", ["help"]],
    ["a user name with a dash after --", ["reset-password", "--", "-bob"], "reset-password", ["-bob"]],
    ["--help after -- is an argument", ["restore", "--", "--help"], "restore", ["--help"]],
    ["only the first -- separates", ["restore", "--", "--"], "restore", ["--"]],
    ["arguments on both sides of --", ["restore", "a.db", "--"], "restore", ["a.db"]],
    ["restore's file after --", ["restore", "--", "a.db"], "restore", ["a.db"]],
    ["a name with blanks inside is kept as given", ["reset-password", " bob "], "reset-password", [" bob "]],
  ] as const)("runs: %s", (_rule, argv, command, args) => {
    expect(parseCommandLine([...argv])).toStrictEqual({ command, args: [...args] });
  });

  test.each([
    ["help", ["help"]],
    ["--help", ["--help"]],
    ["-h", ["-h"]],
    ["help with anything after it", ["help", "restore", "--bogus"]],
    ["--help after a command", ["check", "--help"]],
    ["-h after a command's argument", ["reset-password", "bob", "-h"]],
    ["--help after --version", ["--version", "--help"]],
    ["--help after an unknown command", ["nonsense", "--help"]],
    ["-h after an unknown option", ["--port", "-h"]],
    ["--help before --", ["restore", "--help", "--", "a.db"]],
  ] as const)("help: %s", (_rule, argv) => {
    expect(parseCommandLine([...argv])).toStrictEqual({ command: "help" });
  });

  test.each([
    ["an unknown command", ["foo"], "未知命令: foo"],
    ["commands are lower case", ["Serve"], "未知命令: Serve"],
    ["an unknown leading option", ["--port", "1"], "未知选项: --port"],
    ["a lone dash", ["-"], "未知选项: -"],
    ["a lone --", ["--"], "未知选项: --"],
    ["an option serve does not take", ["serve", "--port", "1"], "kura serve 不接受选项 --port"],
    ["options are checked before the count", ["backup", "now", "--dry-run"], "kura backup 不接受选项 --dry-run"],
    ["a lone dash as an option", ["reset-password", "-"], "kura reset-password 不接受选项 -"],
    ["the first option before --", ["restore", "a.db", "-f", "--x", "--", "b"], "kura restore 不接受选项 -f"],
    ["serve takes no argument", ["serve", "now"], "kura serve 的参数过多：now"],
    ["nor after --", ["serve", "--", "x"], "kura serve 的参数过多：x"],
    ["backup takes none", ["backup", "now"], "kura backup 的参数过多：now"],
    ["check takes none", ["check", "all"], "kura check 的参数过多：all"],
    ["version takes none", ["version", "extra"], "kura version 的参数过多：extra"],
    ["selftest takes none", ["selftest", "x"], "kura selftest 的参数过多：x"],
    ["reset-password takes one", ["reset-password", "admin", "bob"], "kura reset-password 的参数过多：bob"],
    ["restore takes one: the extra ones are listed", ["restore", "a.db", "b.db", "c.db"], "kura restore 的参数过多：b.db c.db"],
    ["restore needs its file", ["restore"], "kura restore 缺少参数"],
    ["restore needs its file, -- or not", ["restore", "--"], "kura restore 缺少参数"],
    ["an empty argument", ["reset-password", ""], "kura reset-password 的参数不能为空"],
    ["a blank argument", ["reset-password", " \t"], "kura reset-password 的参数不能为空"],
    ["a blank argument after --", ["restore", "--", " "], "kura restore 的参数不能为空"],
    ["the count before blanks", ["restore", "", "b.db"], "kura restore 的参数过多：b.db"],
  ] as const)("refused: %s", (_rule, argv, error) => {
    expect(parseCommandLine([...argv])).toStrictEqual({ error });
  });

  test("the usage names exactly the commands the parser runs, and help", () => {
    const listed = USAGE.split("\n")
      .filter((line) => /^ {2}\S/.test(line))
      .map((line) => line.trim().split(" ")[0]!);
    expect(USAGE.split("\n")[0]).toBe("用法: kura [命令]");
    expect(listed).toEqual(["serve", "reset-password", "backup", "check", "restore", "version", "selftest", "help"]);
    for (const command of listed) {
      const parsed = parseCommandLine(command === "restore" ? [command, "a.db"] : [command]);
      expect([command, "error" in parsed]).toEqual([command, false]);
    }
  });

  test("after --, words are taken verbatim: only counted and checked for blanks; without dashes -- changes nothing", () => {
    const bounds: Record<string, [number, number]> = {
      serve: [0, 0],
      "reset-password": [0, 1],
      backup: [0, 0],
      check: [0, 0],
      restore: [1, 1],
      version: [0, 0],
      selftest: [0, 0],
    };
    const word = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("-", "--", "-h", "--help", "help", " ", "-bob"));
    fc.assert(
      fc.property(fc.constantFrom(...Object.keys(bounds)), fc.array(word, { maxLength: 3 }), (command, words) => {
        const [min, max] = bounds[command]!;
        const expected =
          words.length > max
            ? { error: `kura ${command} 的参数过多：${words.slice(max).join(" ")}` }
            : words.length < min
              ? { error: `kura ${command} 缺少参数` }
              : words.some((w) => w.trim() === "")
                ? { error: `kura ${command} 的参数不能为空` }
                : { command, args: words };
        expect(parseCommandLine([command, "--", ...words])).toStrictEqual(expected);
        if (!words.some((w) => w.startsWith("-"))) expect(parseCommandLine([command, ...words])).toStrictEqual(expected);
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });
});
