// The rules of `w`, `format` and WebP negotiation one by one (spec 4.5 rule 1), each case chosen
// so that breaking one rule in src/delivery/negotiate.ts or params.ts changes its answer.
import { describe, expect, test } from "bun:test";
import {
  acceptsWebp,
  chooseRepresentation,
  formatToMime,
  mimeToFormat,
  type Representation,
  rememberedAcceptAnswers,
  WEBP_MAX_SIDE,
} from "../../src/delivery/negotiate.ts";
import { type DeliveryParamSettings, parseDeliveryParams, parseDeliveryQuery } from "../../src/delivery/params.ts";
import { APNG_MIME } from "../../src/images/sniff.ts";

const S: DeliveryParamSettings = { process_widths: [1280, 320, 640], process_formats: ["webp", "jpeg", "png", "avif"] };
const ALL = ["webp", "jpeg", "png", "avif", "gif"];
const WEBP = "image/avif,image/webp,*/*;q=0.8";
const NONE = { width: null, format: null };

/** Both readers of the query (the raw fast path and URLSearchParams) give the same outcome. */
function bothReaders(query: string, s: DeliveryParamSettings = S) {
  const outcome = (run: () => unknown) => {
    try {
      return { ok: run() };
    } catch (err) {
      return { error: (err as Error).message };
    }
  };
  const raw = outcome(() => parseDeliveryQuery(query, s));
  expect(outcome(() => parseDeliveryParams(new URLSearchParams(query), s))).toEqual(raw);
  return raw;
}

describe("query parameters", () => {
  test("the first format wins, as the first w does", () => {
    expect(bothReaders("format=png&format=webp")).toEqual({ ok: { width: null, format: "png" } });
    expect(bothReaders("format=avif&w=320&format=bmp&w=9")).toEqual({ ok: { width: 320, format: "avif" } });
  });

  test("a format with blanks around it or in capitals is the format", () => {
    expect(bothReaders("format=%20WebP%20")).toEqual({ ok: { width: null, format: "webp" } });
    expect(parseDeliveryQuery("format= png", S)).toEqual({ width: null, format: "png" });
  });

  test("each refusal says what is allowed, widths in ascending order", () => {
    expect(bothReaders("w=641")).toEqual({ error: "参数 w 不在允许的宽度内（可用：320, 640, 1280）" });
    expect(bothReaders("w=640", { ...S, process_widths: [] })).toEqual({ error: "当前未开放缩放，不支持参数 w" });
    expect(bothReaders("w=640", { ...S, process_widths: null })).toEqual({ error: "当前未开放缩放，不支持参数 w" });
    expect(bothReaders("w=6a")).toEqual({ error: "参数 w 必须是整数像素宽度" });
    expect(bothReaders("format=gif")).toEqual({ error: "参数 format 无效（可用：webp, jpeg, png, avif, auto）" });
    expect(bothReaders("format=webp", { ...S, process_formats: [] })).toEqual({ error: "参数 format 无效（可用：auto）" });
  });
});

describe("format names", () => {
  test("each format has its own MIME type, and the aliases browsers and old cameras write are JPEG", () => {
    expect(ALL.map((f) => formatToMime(f as never))).toEqual(["image/webp", "image/jpeg", "image/png", "image/avif", "image/gif"]);
    expect(mimeToFormat("image/pjpeg")).toBe("jpeg");
    expect(mimeToFormat("IMAGE/JPG")).toBe("jpeg");
    expect(mimeToFormat(" Image/Avif ; q=1")).toBe("avif");
    expect(mimeToFormat("")).toBeNull();
  });
});

describe("Accept", () => {
  const table: Array<[string, boolean]> = [
    ["image/png, image/webp", true], // a range after ", " is read without its blank
    ["image/webp;level=1;q=0", false], // parameters other than q are skipped, not read as the weight
    ["image/webp;level=1", true],
    ["image/webp;q= ", true], // a blank weight is malformed: the default 1
    ["image/webp; Q = 0 ", false],
    ["image/webp;q=0.5, image/webp;q=0", false], // a refusal among duplicates wins
  ];
  for (const [accept, expected] of table) test(`${JSON.stringify(accept)} → ${expected}`, () => expect(acceptsWebp(accept)).toBe(expected));

  test("answers stay right while the remembered ones are bounded, whatever headers clients invent", () => {
    for (let i = 0; i < 1000; i++) {
      const refusal = i % 2 === 0;
      expect(acceptsWebp(`image/webp;q=${refusal ? 0 : 1};x=${i}`)).toBe(!refusal);
      expect(rememberedAcceptAnswers()).toBeLessThanOrEqual(256);
    }
    expect(acceptsWebp("image/webp;q=0;x=1")).toBe(false); // asked again after being forgotten
  });
});

describe("chooseRepresentation", () => {
  const choose = (mime: string, size: [number, number], params: { width: number | null; format: string | null }, accept: string | null = WEBP) =>
    chooseRepresentation({ mime, width: size[0], height: size[1] }, params, accept, ALL);

  test("an APNG stays the animated original unless another format is asked for", () => {
    expect(choose(APNG_MIME, [800, 600], NONE)).toEqual({ kind: "original", varyAccept: false });
    expect(choose(APNG_MIME, [800, 600], { width: 320, format: null })).toEqual({ kind: "original", varyAccept: false });
    expect(choose(APNG_MIME, [800, 600], { width: 320, format: "png" })).toEqual({ kind: "original", varyAccept: false });
    expect(choose(APNG_MIME, [800, 600], { width: 320, format: "webp" })).toEqual({ kind: "variant", width: 320, format: "webp", varyAccept: false });
    // A plain PNG asked as PNG at a smaller width is a resize.
    expect(choose("image/png", [800, 600], { width: 320, format: "png" })).toEqual({ kind: "variant", width: 320, format: "png", varyAccept: false });
  });

  test("w equal to the stored width is the stored size: no resize", () => {
    expect(choose("image/jpeg", [640, 480], { width: 640, format: null }, "*/*")).toEqual({ kind: "original", varyAccept: true });
    expect(choose("image/jpeg", [640, 480], { width: 640, format: "jpeg" })).toEqual({ kind: "original", varyAccept: false });
    expect(choose("image/jpeg", [641, 480], { width: 640, format: null }, "*/*")).toEqual({ kind: "variant", width: 640, format: "jpeg", varyAccept: true });
  });

  test("WebP is negotiated only when the output fits libwebp's 16383 px on both sides", () => {
    const webp = (width: number): Representation => ({ kind: "variant", width, format: "webp", varyAccept: true });
    const original: Representation = { kind: "original", varyAccept: false };
    expect(choose("image/jpeg", [WEBP_MAX_SIDE, 100], NONE)).toEqual(webp(0));
    expect(choose("image/jpeg", [WEBP_MAX_SIDE + 1, 100], NONE)).toEqual(original);
    expect(choose("image/jpeg", [100, WEBP_MAX_SIDE], NONE)).toEqual(webp(0));
    expect(choose("image/jpeg", [100, WEBP_MAX_SIDE + 1], NONE)).toEqual(original);
    expect(choose("image/png", [WEBP_MAX_SIDE + 1, WEBP_MAX_SIDE + 1], NONE)).toEqual(original);
    // Resized to fit: the output's size decides, its height scaled with the width.
    expect(choose("image/jpeg", [40000, 1000], { width: 1280, format: null })).toEqual(webp(1280));
    expect(choose("image/jpeg", [1000, 20000], { width: 640, format: null })).toEqual(webp(640)); // 640 × 12800
    expect(choose("image/jpeg", [1000, 30000], { width: 640, format: null })).toEqual({ kind: "variant", width: 640, format: "jpeg", varyAccept: false }); // 640 × 19200
    expect(choose("image/jpeg", [1280, 2 * WEBP_MAX_SIDE], { width: 640, format: null })).toEqual(webp(640)); // 640 × 16383
    expect(choose("image/jpeg", [1280, 2 * WEBP_MAX_SIDE + 2], { width: 640, format: null })).toEqual({
      kind: "variant",
      width: 640,
      format: "jpeg",
      varyAccept: false,
    }); // 640 × 16384
    // A width past the stored one keeps the stored size.
    expect(choose("image/jpeg", [100, WEBP_MAX_SIDE + 1], { width: 1280, format: null })).toEqual(original);
  });

  test("a stored type that cannot be written back is resized to PNG", () => {
    expect(choose("image/bmp", [4000, 3000], { width: 320, format: null })).toEqual({ kind: "variant", width: 320, format: "png", varyAccept: false });
    expect(choose("image/bmp", [4000, 3000], NONE)).toEqual({ kind: "original", varyAccept: false });
  });
});
