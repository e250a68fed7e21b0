/**
 * The JPEG metadata walk rule by rule (src/images/exif-jpeg.ts) on synthetic segment sequences: what
 * is kept byte for byte (JFIF without its thumbnail, ICC, Adobe, image data and markers without a
 * length, entropy-coded data with its stuffing and restarts), what is dropped (EXIF, other XMP,
 * IPTC, comments, unknown APPn, stray and fill bytes, anything after EOI), where the minimal EXIF
 * goes back, and each structure refused. Real encoders' files are judged in exif.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { stripJpeg } from "../../src/images/exif-jpeg";
import { MalformedImageError, minimalExif } from "../../src/images/exif-parts";

const SOI = Buffer.from([0xff, 0xd8]);
const EOI = Buffer.from([0xff, 0xd9]);
const seg = (marker: number, payload: string | Buffer) => {
  const body = typeof payload === "string" ? Buffer.from(payload, "latin1") : payload;
  const head = Buffer.from([0xff, marker, 0, 0]);
  head.writeUInt16BE(body.length + 2, 2);
  return Buffer.concat([head, body]);
};
const jpeg = (...parts: Buffer[]) => Buffer.concat(parts);
const hex = (b: Buffer) => b.toString("hex");
const strip = (src: Buffer) => stripJpeg(src, false).bytes;
function refusal(src: Buffer): string {
  try {
    stripJpeg(src, false);
    return "ok";
  } catch (err) {
    if (err instanceof MalformedImageError) return err.message;
    throw err;
  }
}

const DQT = seg(0xdb, Buffer.alloc(65, 1));
const SOF = seg(0xc0, Buffer.from([8, 0, 1, 0, 1, 1, 1, 0x11, 0]));
/** SOS header, then entropy-coded data with a stuffed 0xFF, restart markers and a fill run. */
const SCAN = jpeg(
  seg(0xda, Buffer.from([1, 1, 0, 0, 63, 0])),
  Buffer.from([0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56, 0xff, 0xd7, 0x78, 0xff, 0xff, 0xd3, 0x9a]),
);
const IMAGE = jpeg(DQT, SOF, SCAN);
const JFIF = "JFIF\0\x01\x01\0\0\x01\0\x01\0\0";

describe("kept and dropped segments", () => {
  test("image data, JFIF, ICC and Adobe are kept byte for byte; EXIF, XMP, IPTC, comments and other APPn go", () => {
    const kept = [seg(0xe0, JFIF), seg(0xe2, "ICC_PROFILE\0\x01\x01profile"), seg(0xee, "Adobe")];
    const dropped = [
      // An EXIF block of one empty IFD: orientation 1, so nothing is written back.
      seg(0xe1, Buffer.from("Exif\0\0MM\0*\0\0\0\x08\0\0\0\0\0\0GPS secret", "latin1")),
      seg(0xe1, "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta>GPS secret</x:xmpmeta>"),
      seg(0xed, "Photoshop 3.0\u00008BIM secret"),
      seg(0xfe, "a comment"),
      seg(0xef, "vendor"),
      seg(0xe0, "JFXX\0thumbnail"),
      seg(0xee, "Adobf"),
      seg(0xec, "Adobe"),
      seg(0xe2, "ICC_PROFILE"),
    ];
    const src = jpeg(SOI, kept[0]!, dropped[0]!, kept[1]!, ...dropped.slice(1), kept[2]!, IMAGE, EOI);
    expect(hex(strip(src))).toBe(hex(jpeg(SOI, ...kept, IMAGE, EOI)));
  });

  test("a JFIF thumbnail goes, its header stays with the thumbnail size zeroed; a 14-byte JFIF is kept as it is", () => {
    const withThumb = seg(0xe0, `JFIF\0\x01\x01\0\0\x01\0\x01\x02\x03${"RGB".repeat(6)}`);
    expect(hex(strip(jpeg(SOI, withThumb, IMAGE, EOI)))).toBe(hex(jpeg(SOI, seg(0xe0, `JFIF\0\x01\x01\0\0\x01\0\x01\0\0`), IMAGE, EOI)));
    // Only one of the two sizes set: still a thumbnail.
    const half = seg(0xe0, `JFIF\0\x01\x01\0\0\x01\0\x01\0\x02${"RG".repeat(2)}`);
    expect(hex(strip(jpeg(SOI, half, IMAGE, EOI)))).toBe(hex(jpeg(SOI, seg(0xe0, JFIF), IMAGE, EOI)));
    const exact = seg(0xe0, "JFIF\0\x01\x01\0\0\x01\0\x01\x02\x03");
    expect(hex(strip(jpeg(SOI, exact, IMAGE, EOI)))).toBe(hex(jpeg(SOI, exact, IMAGE, EOI)));
    // The other size set alone: a thumbnail too.
    const wide = seg(0xe0, `JFIF\0\x01\x01\0\0\x01\0\x01\x02\0${"RGB".repeat(2)}`);
    expect(hex(strip(jpeg(SOI, wide, IMAGE, EOI)))).toBe(hex(jpeg(SOI, seg(0xe0, JFIF), IMAGE, EOI)));
    // A 0×0 thumbnail with bytes after it is no thumbnail: the segment is kept as it is.
    const padded = seg(0xe0, `${JFIF}\x01\x02`);
    expect(hex(strip(jpeg(SOI, padded, IMAGE, EOI)))).toBe(hex(jpeg(SOI, padded, IMAGE, EOI)));
  });

  test("each kept kind is recognised in its own APPn only: the same identifier in another APPn goes", () => {
    const ICC = `ICC_PROFILE\0\x01\x01${"p".repeat(20)}`;
    const ISO = `urn:iso:std:iso:ts:21496:-1\0${"g".repeat(8)}`;
    const XMP = 'http://ns.adobe.com/xap/1.0/\0<x:xmpmeta xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0"/>';
    const elsewhere = [seg(0xe1, JFIF), seg(0xe3, ICC), seg(0xe3, ISO), seg(0xe2, XMP), seg(0xe4, "Adobe\0\x64\0\0\0\0\x01")];
    expect(hex(strip(jpeg(SOI, ...elsewhere, IMAGE, EOI)))).toBe(hex(jpeg(SOI, IMAGE, EOI)));
    // An EXIF in APP2 is not read either: no orientation comes back from it.
    const exifInApp2 = seg(0xe2, minimalExif({ orientation: 6 }, true));
    expect(stripJpeg(jpeg(SOI, exifInApp2, IMAGE, EOI), false)).toMatchObject({ orientation: 1 });
  });

  test("markers F0–FD (JPEG extensions) are image data, kept; an empty segment right before EOI is read", () => {
    const extension = seg(0xf0, Buffer.from([1, 2, 3]));
    expect(hex(strip(jpeg(SOI, extension, IMAGE, EOI)))).toBe(hex(jpeg(SOI, extension, IMAGE, EOI)));
    expect(hex(strip(jpeg(SOI, DQT, SOF, seg(0xfe, ""), EOI)))).toBe(hex(jpeg(SOI, DQT, SOF, EOI)));
  });

  test("markers without a length (TEM, RSTn) are kept; stray bytes and fill bytes before a marker are dropped", () => {
    const src = jpeg(
      SOI,
      Buffer.from([0x00, 0x11, 0xff, 0xff, 0xff]),
      Buffer.from([0x01]),
      DQT.subarray(0, 0),
      Buffer.from([0xff, 0xd0, 0xff, 0xd7]),
      IMAGE,
      EOI,
    );
    expect(hex(strip(src))).toBe(hex(jpeg(SOI, Buffer.from([0xff, 0x01, 0xff, 0xd0, 0xff, 0xd7]), IMAGE, EOI)));
  });

  test("entropy-coded data runs to the first real marker; anything after EOI, and a last lone byte, is dropped", () => {
    expect(hex(strip(jpeg(SOI, IMAGE, EOI, Buffer.from("trailing junk"))))).toBe(hex(jpeg(SOI, IMAGE, EOI)));
    // Without EOI the file is cut off (an upload broken off mid-way): refused, not stored as it is.
    expect(refusal(jpeg(SOI, IMAGE))).toBe("JPEG 数据不完整（缺少结束标记 EOI）");
    expect(refusal(jpeg(SOI, DQT, Buffer.from([0xff])))).toBe("JPEG 数据不完整（缺少结束标记 EOI）");
    expect(hex(strip(jpeg(SOI, DQT, Buffer.from([0xff]), EOI)))).toBe(hex(jpeg(SOI, DQT, EOI)));
    // An empty segment (length 2) is a segment.
    expect(hex(strip(jpeg(SOI, seg(0xdd, ""), IMAGE, EOI)))).toBe(hex(jpeg(SOI, seg(0xdd, ""), IMAGE, EOI)));
  });
});

describe("orientation", () => {
  const exif = (orientation: number) => seg(0xe1, minimalExif({ orientation }, true));

  test("the first EXIF's orientation is written back as a minimal EXIF right after SOI and a leading JFIF", () => {
    const out = stripJpeg(jpeg(SOI, seg(0xe0, JFIF), exif(6), exif(3), IMAGE, EOI), false);
    expect(out.orientation).toBe(6);
    expect(hex(out.bytes)).toBe(hex(jpeg(SOI, seg(0xe0, JFIF), exif(6), IMAGE, EOI)));
    const noJfif = stripJpeg(jpeg(SOI, DQT, exif(8), SOF, SCAN, EOI), false);
    expect(hex(noJfif.bytes)).toBe(hex(jpeg(SOI, exif(8), DQT, SOF, SCAN, EOI)));
    // An EXIF without the Exif prefix is not read.
    expect(stripJpeg(jpeg(SOI, seg(0xe1, minimalExif({ orientation: 6 }, false)), IMAGE, EOI), false).orientation).toBe(1);
  });
});

describe("refused structures", () => {
  test("the header, a marker that cannot be there, a segment cut or of an impossible length", () => {
    expect(refusal(Buffer.from([0xff, 0xd8, 0xff]))).toBe("JPEG 文件头无效");
    expect(refusal(jpeg(Buffer.from([0xff, 0xd9]), IMAGE, EOI))).toBe("JPEG 文件头无效");
    expect(refusal(jpeg(Buffer.from([0xfe, 0xd8]), IMAGE, EOI))).toBe("JPEG 文件头无效");
    expect(refusal(jpeg(SOI, EOI))).toBe("ok");
    expect(refusal(jpeg(SOI, SOI, IMAGE, EOI))).toBe("JPEG 标记无效");
    expect(refusal(jpeg(SOI, Buffer.from([0xff, 0x00, 0x00, 0x04]), IMAGE, EOI))).toBe("JPEG 标记无效");
    expect(refusal(jpeg(SOI, Buffer.from([0xff, 0xdb, 0x00])))).toBe("JPEG 标记无效");
    expect(refusal(jpeg(SOI, Buffer.from([0xff, 0xdb, 0x00, 0x01]), IMAGE, EOI))).toBe("JPEG 段长度无效");
    expect(refusal(jpeg(SOI, Buffer.from([0xff, 0xdb, 0x00, 0x10, 1, 2, 3])))).toBe("JPEG 段长度无效");
    // A segment ending exactly at the end of the file is whole, but a file that ends there has no EOI: cut off.
    expect(refusal(jpeg(SOI, seg(0xdb, "abc"), EOI))).toBe("ok");
    expect(refusal(jpeg(SOI, seg(0xdb, "abc")))).toBe("JPEG 数据不完整（缺少结束标记 EOI）");
  });
});
