/**
 * The gain-map pieces a strip keeps (src/images/exif-gainmap.ts), rule by rule on synthetic input:
 * the XMP whitelist (names, the exact value shapes, both quote styles, per-channel sequences, the
 * namespace declaration, the first value winning) and the packet it writes; the MPF index reader's
 * every bound (header, IFD, entries, count, list size and place) in both byte orders; the MPF
 * segment writer's bytes. Real Ultra HDR files are in exif-gainmap.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { hdrgmXmp, type MpfImage, mpfSegment, readMpf } from "../../src/images/exif-gainmap";

const XMP_ID = "http://ns.adobe.com/xap/1.0/\0";
const NS = `xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/"`;
const packet = (description: string, ns = NS) =>
  Buffer.from(`${XMP_ID}<x:xmpmeta><rdf:RDF><rdf:Description ${ns} ${description}</rdf:RDF></x:xmpmeta>`, "latin1");
/** The kept properties, as name → value(s), read back from the packet hdrgmXmp wrote. */
function kept(description: string, ns = NS): Record<string, string | string[]> | undefined {
  const out = hdrgmXmp(packet(description, ns))?.toString("latin1");
  if (out === undefined) return undefined;
  const props: Record<string, string | string[]> = {};
  for (const m of out.matchAll(/ hdrgm:(\w+)="([^"]*)"/g)) props[m[1]!] = m[2]!;
  for (const m of out.matchAll(/<hdrgm:(\w+)><rdf:Seq>(.*?)<\/rdf:Seq>/g)) props[m[1]!] = [...m[2]!.matchAll(/<rdf:li>(.*?)<\/rdf:li>/g)].map((li) => li[1]!);
  return props;
}
const withVersion = (rest: string) => `hdrgm:Version="1.0" ${rest}/>`;

describe("the hdrgm whitelist", () => {
  test("numbers: optional sign, up to 20 digits each side of the point, an exponent of up to 3 digits; nothing around them", () => {
    for (const good of ["1", "-1.5", "+2.", ".5", ".25", "1e3", "1.5E-10", "12345678901234567890", "0.12345678901234567890", "1e+123"]) {
      expect([good, kept(withVersion(`hdrgm:Gamma="${good}"`))?.Gamma]).toEqual([good, good]);
    }
    for (const bad of [
      "1.0 John Smith",
      "x1",
      "1x",
      "1e1234",
      "123456789012345678901",
      ".123456789012345678901",
      "..5",
      "1.2.3",
      ".",
      "e5",
      "1e",
      "--1",
      "-.",
      "1,5",
    ]) {
      expect([bad, kept(withVersion(`hdrgm:Gamma="${bad}"`))?.Gamma]).toEqual([bad, undefined]);
    }
  });

  test("Version is one to three dotted numbers of up to 3 digits; BaseRenditionIsHDR is True or False exactly", () => {
    for (const good of ["1", "1.0", "1.2.3", "255.255.255"]) expect(kept(`hdrgm:Version="${good}"/>`)?.Version).toBe(good);
    for (const bad of ["1.0.0.0", "1234", "v1", "1.0 beta", "1.1000", "1."]) expect(kept(`hdrgm:Version="${bad}"/>`)).toBeUndefined();
    for (const flag of ["True", "False"]) expect(kept(withVersion(`hdrgm:BaseRenditionIsHDR="${flag}"`))?.BaseRenditionIsHDR).toBe(flag);
    for (const flag of ["true", "Truex", "xFalse", "1"]) expect(kept(withVersion(`hdrgm:BaseRenditionIsHDR="${flag}"`))?.BaseRenditionIsHDR).toBeUndefined();
  });

  test("attributes in either quote with blanks around =, values trimmed; unknown names and the second of a name dropped", () => {
    expect(kept(`hdrgm:Version = '1.0' hdrgm:Gamma=' 2.2 ' hdrgm:Owner="3" hdrgm:Gamma="9"/>`)).toEqual({ Version: "1.0", Gamma: "2.2" });
    // The first value of a property wins, whichever form it came in.
    expect(kept(`hdrgm:Version="1.0" hdrgm:HDRCapacityMax="3"><hdrgm:HDRCapacityMax>4</hdrgm:HDRCapacityMax></rdf:Description>`)).toEqual({
      Version: "1.0",
      HDRCapacityMax: "3",
    });
  });

  test("the namespace must be declared (blanks around = allowed) and be Adobe's gain-map namespace", () => {
    expect(kept(withVersion(""), `xmlns:hdrgm = "http://ns.adobe.com/hdr-gain-map/1.0/"`)).toEqual({ Version: "1.0" });
    expect(kept(withVersion(""), `xmlns:hdrgm='http://ns.adobe.com/hdr-gain-map/1.0/'`)).toEqual({ Version: "1.0" });
    expect(kept(withVersion(""), `xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/2.0/"`)).toBeUndefined();
    expect(kept(withVersion(""), `xmlns:other="http://ns.adobe.com/hdr-gain-map/1.0/"`)).toBeUndefined();
  });

  test("per-channel properties may be a sequence of exactly three valid values; anything else in the element is dropped", () => {
    const seq = (...values: string[]) => `<rdf:Seq>${values.map((v) => `<rdf:li>${v}</rdf:li>`).join("")}</rdf:Seq>`;
    const element = (name: string, inner: string) => `hdrgm:Version="1.0"><hdrgm:${name}>${inner}</hdrgm:${name}></rdf:Description>`;
    expect(kept(element("GainMapMax", seq("1", " 2 ", "3")))).toEqual({ Version: "1.0", GainMapMax: ["1", "2", "3"] });
    expect(kept(element("GainMapMax", `\n ${seq("1", "2", "3")}\n`))).toEqual({ Version: "1.0", GainMapMax: ["1", "2", "3"] });
    for (const name of ["GainMapMin", "Gamma", "OffsetSDR", "OffsetHDR"]) expect(kept(element(name, seq("1", "2", "3")))?.[name]).toEqual(["1", "2", "3"]);
    expect(kept(element("GainMapMax", seq("4")))).toEqual({ Version: "1.0", GainMapMax: "4" });
    expect(kept(element("GainMapMax", seq("1", "2")))?.GainMapMax).toBeUndefined();
    expect(kept(element("GainMapMax", seq("1", "x", "3")))?.GainMapMax).toBeUndefined();
    expect(kept(element("HDRCapacityMax", seq("1", "2", "3")))?.HDRCapacityMax).toBeUndefined();
    expect(kept(element("GainMapMax", `junk${seq("1", "2", "3")}`))?.GainMapMax).toBeUndefined();
    expect(kept(element("GainMapMax", `${seq("1", "2", "3")}<dc:creator>x</dc:creator>`))?.GainMapMax).toBeUndefined();
    expect(kept(element("GainMapMax", `<rdf:Seq>x<rdf:li>1</rdf:li></rdf:Seq>`))?.GainMapMax).toBeUndefined();
    expect(kept(element("GainMapMax", `<rdf:Seq><rdf:li>1</rdf:li>x</rdf:Seq>`))?.GainMapMax).toBeUndefined();
  });

  test("the packet written holds only the kept properties in Adobe's namespace, self-closed when it has no sequences", () => {
    const only = hdrgmXmp(packet(withVersion(`hdrgm:Gamma="1"`)))!.toString("latin1");
    expect(only).toBe(
      `${XMP_ID}<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" hdrgm:Gamma="1"/></rdf:RDF></x:xmpmeta>`,
    );
    const withSeq = hdrgmXmp(
      packet(`hdrgm:Version="1.0"><hdrgm:Gamma><rdf:Seq><rdf:li>1</rdf:li><rdf:li>2</rdf:li><rdf:li>3</rdf:li></rdf:Seq></hdrgm:Gamma></rdf:Description>`),
    )!;
    expect(withSeq.toString("latin1")).toContain(
      `hdrgm:Version="1.0"><hdrgm:Gamma><rdf:Seq><rdf:li>1</rdf:li><rdf:li>2</rdf:li><rdf:li>3</rdf:li></rdf:Seq></hdrgm:Gamma></rdf:Description></rdf:RDF>`,
    );
  });
});

describe("the MPF index", () => {
  const images: MpfImage[] = [
    { attributes: 0x20030000, size: 1000, offset: 0 },
    { attributes: 0x80000000, size: 500, offset: 1200 },
  ];
  /** The payload readMpf takes: the segment without its marker and length. */
  const payloadOf = (segment: Buffer) => segment.subarray(4);

  test("the written segment: marker, length, MPF id, a big-endian TIFF header, version 0100, count and list", () => {
    const seg = mpfSegment(images);
    expect(seg.readUInt16BE(0)).toBe(0xffe2);
    expect(seg.readUInt16BE(2)).toBe(seg.length - 2);
    expect(seg.toString("latin1", 4, 12)).toBe("MPF\0MM\0*");
    expect(seg.toString("latin1", 8 + 10 + 8, 8 + 10 + 12)).toBe("0100");
    expect(readMpf(payloadOf(seg))).toEqual(images);
  });

  /** A little-endian index written by hand: IFD at 8 with `entries`, then `extra` bytes. */
  function littleEndian(entries: [number, number, number, number][], extra: Buffer, ifd = 8) {
    const head = Buffer.alloc(ifd + 2 + entries.length * 12 + 4);
    head.write("II", 0, "latin1");
    head.writeUInt16LE(42, 2);
    head.writeUInt32LE(ifd, 4);
    head.writeUInt16LE(entries.length, ifd);
    entries.forEach(([tag, type, count, value], i) => {
      const at = ifd + 2 + i * 12;
      head.writeUInt16LE(tag, at);
      head.writeUInt16LE(type, at + 2);
      head.writeUInt32LE(count, at + 4);
      head.writeUInt32LE(value, at + 8);
    });
    return Buffer.concat([Buffer.from("MPF\0", "latin1"), head, extra]);
  }
  const list = (n: number) => {
    const b = Buffer.alloc(16 * n);
    for (let i = 0; i < n; i++) {
      b.writeUInt32LE(i + 1, i * 16);
      b.writeUInt32LE(100 * (i + 1), i * 16 + 4);
      b.writeUInt32LE(i === 0 ? 0 : 1000 * i, i * 16 + 8);
    }
    return b;
  };
  const ENTRIES_AT = 8 + 2 + 2 * 12 + 4; // the list right after an IFD of two entries
  const index = (n: number, opts: { count?: number; countType?: number; countCount?: number; listType?: number; bytes?: number; at?: number } = {}) =>
    littleEndian(
      [
        [0xb001, opts.countType ?? 4, opts.countCount ?? 1, opts.count ?? n],
        [0xb002, opts.listType ?? 7, opts.bytes ?? 16 * n, opts.at ?? ENTRIES_AT],
      ],
      list(n),
    );

  test("little-endian lists of 1 to 16 images are read; the count must agree when it is given as one LONG", () => {
    expect(readMpf(index(1))).toEqual([{ attributes: 1, size: 100, offset: 0 }]);
    expect(readMpf(index(16))?.length).toBe(16);
    expect(readMpf(index(2))?.[1]).toEqual({ attributes: 2, size: 200, offset: 1000 });
    expect(readMpf(index(2, { count: 3 }))).toBeUndefined();
    // A count of another type, or with another count field, is not the count: it is ignored.
    expect(readMpf(index(2, { count: 3, countType: 3 }))?.length).toBe(2);
    expect(readMpf(index(2, { count: 3, countCount: 2 }))?.length).toBe(2);
  });

  test("refused: too many or no images, a list whose byte count is not whole entries, of another type, before the IFD or past the end", () => {
    expect(readMpf(index(17))).toBeUndefined();
    expect(readMpf(index(0))).toBeUndefined();
    expect(readMpf(index(2, { bytes: 33 }))).toBeUndefined();
    expect(readMpf(index(2, { listType: 4 }))).toBeUndefined();
    expect(readMpf(index(1, { at: 7 }))).toBeUndefined();
    expect(readMpf(index(1, { at: 8 }))?.length).toBe(1);
    // The list may end exactly at the end of the payload, not a byte past it.
    const exact = index(2);
    expect(readMpf(exact)?.length).toBe(2);
    expect(readMpf(exact.subarray(0, exact.length - 1))).toBeUndefined();
  });

  test("refused: no TIFF header, an IFD before the header's end or past the data, an entry cut short", () => {
    expect(readMpf(Buffer.from("MPF\0XX\0*\0\0\0\x08", "latin1"))).toBeUndefined();
    const good = index(1);
    const withIfd = (ifd: number) => {
      const b = Buffer.from(good);
      b.writeUInt32LE(ifd, 4 + 4);
      return b;
    };
    expect(readMpf(withIfd(7))).toBeUndefined();
    expect(readMpf(withIfd(good.length - 4 - 2))?.length).toBeUndefined();
    expect(readMpf(withIfd(good.length - 4 - 1))).toBeUndefined();
    // The list first, then the IFD, whose last entry ends exactly where the payload does (no next-IFD field).
    const tail = Buffer.alloc(8 + 16 + 2 + 12);
    tail.write("II", 0, "latin1");
    tail.writeUInt16LE(42, 2);
    tail.writeUInt32LE(8 + 16, 4);
    tail.set(list(1), 8);
    tail.writeUInt16LE(1, 24);
    tail.writeUInt16LE(0xb002, 26);
    tail.writeUInt16LE(7, 28);
    tail.writeUInt32LE(16, 30);
    tail.writeUInt32LE(8, 34);
    expect(readMpf(Buffer.concat([Buffer.from("MPF\0", "latin1"), tail]))?.length).toBe(1);
    // The IFD claims one more entry than there are bytes for.
    const cut = littleEndian([[0xb002, 7, 16, 0]], Buffer.alloc(0));
    expect(readMpf(cut.subarray(0, cut.length - 4 - 1))).toBeUndefined();
  });
});
