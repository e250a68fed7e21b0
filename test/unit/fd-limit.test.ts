/** The start-up check of the file descriptor limit (src/ops/fd-limit.ts), on /proc/<pid>/limits texts. */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { LOW_OPEN_FILE_LIMIT, openFileLimit, warnIfFewFileDescriptors } from "../../src/ops/fd-limit";

const limitsText = (soft: string, hard = soft) =>
  [
    "Limit                     Soft Limit           Hard Limit           Units     ",
    "Max processes             63425                63425                processes ",
    `Max open files            ${soft.padEnd(20)} ${hard.padEnd(20)} files     `,
    "Max locked memory         8388608              8388608              bytes     ",
  ].join("\n");

describe("file descriptor limit", () => {
  test("the soft limit is read from the limits table, unlimited as Infinity, anything else as unknown", () => {
    expect(openFileLimit(limitsText("1024", "524288"))).toBe(1024);
    expect(openFileLimit(limitsText("unlimited"))).toBe(Number.POSITIVE_INFINITY);
    expect(openFileLimit(limitsText("lots"))).toBeUndefined();
    expect(openFileLimit("Max processes 10 10 processes")).toBeUndefined();
    // This process's own table parses to a number.
    expect(openFileLimit(readFileSync("/proc/self/limits", "utf8"))).toBeGreaterThan(0);
  });

  test("a warning below the threshold only, with the limit; an unreadable table is no warning and no crash", () => {
    const warned: unknown[] = [];
    const log = { warn: (msg: string, fields?: Record<string, unknown>) => void warned.push([msg, fields]) };
    warnIfFewFileDescriptors(log, () => limitsText(String(LOW_OPEN_FILE_LIMIT)));
    warnIfFewFileDescriptors(log, () => limitsText("unlimited"));
    warnIfFewFileDescriptors(log, () => {
      throw new Error("no /proc here");
    });
    expect(warned).toEqual([]);
    warnIfFewFileDescriptors(log, () => limitsText(String(LOW_OPEN_FILE_LIMIT - 1)));
    expect(warned).toEqual([
      [
        "进程的文件描述符上限偏低：连接和上传较多时会耗尽，新连接将无法接入、上传失败，请提高上限（systemd 单元的 LimitNOFILE=，建议 65536）",
        { limit: LOW_OPEN_FILE_LIMIT - 1, recommended: 65536 },
      ],
    ]);
  });
});
