/**
 * The AVIF container edit (src/images/exif-avif.ts), rule by rule on synthetic files built byte by
 * byte here: every box-header form (size < 8, 64-bit largesize, size 0 "to the end" at the top level
 * only, uuid's 16 extra bytes), the bounds of every field read, each item box's versions and field
 * widths, where metadata bytes may lie, the moov walk, and the exact bytes written: the rebuilt
 * `meta` is byte for byte the `meta` one would build without the metadata items, followed by a
 * `free` box of the difference, and only the metadata's bytes are zeroed. Every refusal is pinned by
 * its full message (it reaches the logs). Real AVIFs are in exif-avif.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { stripAvif } from "../../src/images/exif-avif";
import { MalformedImageError } from "../../src/images/exif-parts";
import { u8, u16, u32 } from "../helpers/avif";

const u64 = (n: number | bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
};
/** An iloc field of 0, 4 or 8 bytes (any other width writes nothing: only for files refused before). */
const uN = (n: number, bytes: number) => (bytes === 8 ? u64(n) : bytes === 4 ? u32(n) : Buffer.alloc(0));
const text = (s: string) => Buffer.from(s, "latin1");
const cstr = (s: string) => text(`${s}\0`);
const box = (type: string, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([u32(8 + body.length), text(type), body]);
};
const largeBox = (type: string, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([u32(1), text(type), u64(16 + body.length), body]);
};
const fullBox = (type: string, version: number, flags: number, ...content: Buffer[]) => box(type, u8(version, 0, 0, flags), ...content);
const freeBox = (size: number) => Buffer.concat([u32(size), text("free"), Buffer.alloc(size - 8)]);
/** `b` with the 32-bit size field at `at` set to `size`. */
const sizeAt = (b: Buffer, at: number, size: number) => {
  const out = Buffer.from(b);
  out.writeUInt32BE(size, at);
  return out;
};
/** `b` with `extra` appended inside it (its size field grown). */
const grow = (b: Buffer, extra: Buffer) => sizeAt(Buffer.concat([b, extra]), 0, b.length + extra.length);

type Extent = [offset: number, length: number];
interface Item {
  id: number;
  type: string;
  /** A mime item's content type. */
  content?: string;
  /** Offsets from the data origin (the file, or idat's data), as iloc resolves them (base included). */
  extents?: Extent[];
  method?: number;
  dref?: number;
  base?: number;
  /** This item is EXIF or XMP: the strip must remove it. */
  gone?: boolean;
}
type Ref = [type: string, from: number, to: number[]];
type Association = [id: number, properties: number[]];
type Replaceable = "pitm" | "iloc" | "iinf" | "iref" | "iprp";
interface Layout {
  ilocVersion?: number;
  offsetSize?: number;
  lengthSize?: number;
  baseSize?: number;
  indexSize?: number;
  /** iloc version 0's reserved nibble where later versions have index_size. */
  reserved?: number;
  iinfVersion?: number;
  infeVersion?: number;
  idVersion?: number; // pitm, iref and ipma: 1 for 32-bit item ids
  ipmaFlags?: number;
  refs?: Ref[];
  ipma?: Association[];
  /** A whole child instead of the one built (null: none). */
  replace?: Partial<Record<Replaceable, Buffer | null>>;
  /** Children after the item boxes. */
  extra?: Buffer[];
}

const iloc = (items: Item[], o: Layout = {}) => {
  const [v, off, len, base, index] = [o.ilocVersion ?? 0, o.offsetSize ?? 4, o.lengthSize ?? 4, o.baseSize ?? 0, o.indexSize ?? 0];
  const entries = items.map((i) =>
    Buffer.concat([
      v < 2 ? u16(i.id) : u32(i.id),
      v >= 1 ? u16(i.method ?? 0) : Buffer.alloc(0),
      u16(i.dref ?? 0),
      uN(i.base ?? 0, base),
      u16(i.extents?.length ?? 0),
      ...(i.extents ?? []).flatMap(([offset, length], n) => [uN(n + 1, index), uN(offset - (i.base ?? 0), off), uN(length, len)]),
    ]),
  );
  const widths = u8((off << 4) | len, (base << 4) | (v >= 1 ? index : (o.reserved ?? 0)));
  return fullBox("iloc", v, 0, widths, v < 2 ? u16(items.length) : u32(items.length), ...entries);
};
const infe = (i: Item, v = 2) =>
  fullBox("infe", v, 0, v === 2 ? u16(i.id) : u32(i.id), u16(0), text(i.type), cstr(""), ...(i.content === undefined ? [] : [cstr(i.content)]));
const iinf = (infes: Buffer[], v = 0, count = infes.length) => fullBox("iinf", v, 0, v === 0 ? u16(count) : u32(count), ...infes);
const itemId = (v: number, n: number) => (v === 0 ? u16(n) : u32(n));
const iref = (refs: Ref[], v = 0) =>
  fullBox("iref", v, 0, ...refs.map(([type, from, to]) => box(type, itemId(v, from), u16(to.length), ...to.map((n) => itemId(v, n)))));
const ipma = (entries: Association[], v = 0, flags = 0) =>
  fullBox(
    "ipma",
    v,
    flags,
    u32(entries.length),
    ...entries.map(([id, props]) => Buffer.concat([itemId(v, id), u8(props.length), ...props.map((p) => (flags & 1 ? u16(p) : u8(p)))])),
  );
const iprp = (...parts: Buffer[]) => box("iprp", box("ipco", fullBox("ispe", 0, 0, u32(4, 4))), ...parts);
const HDLR = fullBox("hdlr", 0, 0, u32(0), text("pict"), u32(0, 0, 0), cstr(""));
const pitm = (id: number, v = 0) => fullBox("pitm", v, 0, itemId(v, id));
const meta = (children: Buffer[]) => fullBox("meta", 0, 0, ...children);
const group = (groupId: number, ids: number[]) => fullBox("altr", 0, 0, u32(groupId, ids.length, ...ids));

/** meta's children for `items`: by default each metadata item has a cdsc reference to the picture and every item a property. */
function children(items: Item[], o: Layout = {}): Buffer[] {
  const idv = o.idVersion ?? 0;
  const refs = o.refs ?? items.filter((i) => i.gone).map((i): Ref => ["cdsc", i.id, [1]]);
  const made: Record<Replaceable, Buffer | null> = {
    pitm: pitm(1, idv),
    iloc: iloc(items, o),
    iinf: iinf(
      items.map((i) => infe(i, o.infeVersion)),
      o.iinfVersion,
    ),
    iref: refs.length ? iref(refs, idv) : null,
    iprp: iprp(ipma(o.ipma ?? items.map((i): Association => [i.id, [1]]), idv, o.ipmaFlags)),
  };
  const pick = (name: Replaceable) => (o.replace && name in o.replace ? o.replace[name] : made[name]);
  return [HDLR, pick("pitm"), pick("iloc"), pick("iinf"), pick("iref"), pick("iprp"), ...(o.extra ?? [])].filter(
    (b): b is Buffer => b !== null && b !== undefined,
  );
}
/** The children one would build without the metadata items: their entries, references and properties gone. */
function keptChildren(items: Item[], o: Layout = {}): Buffer[] {
  const gone = new Set(items.filter((i) => i.gone).map((i) => i.id));
  const refs = (o.refs ?? []).filter(([, from]) => !gone.has(from));
  const props = (o.ipma ?? items.map((i): Association => [i.id, [1]])).filter(([id]) => !gone.has(id));
  return children(
    items.filter((i) => !i.gone),
    { ...o, refs, ipma: props },
  );
}

const FTYP = box("ftyp", text("avif"), u32(0), text("mif1avif")); // 24 bytes
const PIC = Buffer.alloc(16, 0xa1);
/** ftyp, then this mdat (its data from 32: picture 32..48, EXIF 48..56, XMP 56..64), then meta at 64. */
const MDAT = box("mdat", PIC, Buffer.alloc(8, 0xe2), Buffer.alloc(8, 0xd3));
const MDAT_ZEROED = box("mdat", PIC, Buffer.alloc(16));
const META_AT = 64;
const PICTURE: Item = { id: 1, type: "av01", extents: [[32, 16]] };
const EXIF: Item = { id: 2, type: "Exif", extents: [[48, 8]], gone: true };
const XMP: Item = { id: 3, type: "mime", content: "application/rdf+xml", extents: [[56, 8]], gone: true };
const ITEMS = [PICTURE, EXIF, XMP];
const THUMB: Item = { id: 4, type: "av01", extents: [[32, 8]] };

interface Placement {
  before?: Buffer[];
  after?: Buffer[];
  /** The top-level boxes around meta as the strip must leave them. */
  zeroedBefore?: Buffer[];
  zeroedAfter?: Buffer[];
  metaBox?: (children: Buffer[]) => Buffer;
  /** Layout of the expected meta, when it differs (a zeroed idat). */
  kept?: Layout;
}
const avif = (metaChildren: Buffer[], p: Placement = {}) =>
  Buffer.concat([FTYP, ...(p.before ?? [MDAT]), (p.metaBox ?? meta)(metaChildren), ...(p.after ?? [])]);

/** The strip of `items` is exactly: the metadata's bytes zeroed, the meta built without them, a free box of the difference. */
function expectStrip(items: Item[], o: Layout = {}, p: Placement = {}) {
  const original = avif(children(items, o), p);
  const oldMeta = (p.metaBox ?? meta)(children(items, o));
  const newMeta = meta(keptChildren(items, p.kept ?? o));
  const expected = Buffer.concat([
    FTYP,
    ...(p.zeroedBefore ?? [MDAT_ZEROED]),
    newMeta,
    freeBox(oldMeta.length - newMeta.length),
    ...(p.zeroedAfter ?? p.after ?? []),
  ]);
  expectOutput(original, expected);
}
function expectOutput(original: Buffer, expected: Buffer) {
  expect(expected.length).toBe(original.length);
  const input = Buffer.from(original);
  const copy = stripAvif(input, false);
  expect(copy.toString("hex")).toBe(expected.toString("hex"));
  expect(copy).not.toBe(input);
  expect(input.equals(original)).toBe(true); // not reusing the source: it is left alone
  const inPlace = stripAvif(input, true);
  expect(inPlace).toBe(input);
  expect(input.equals(expected)).toBe(true);
}

const R = (what: string) => `AVIF 结构无法安全处理：${what}`;
/** The refusal's message, checking `file` was not written to even with reuseSource. */
function refusal(file: Buffer): string {
  const before = Buffer.from(file);
  try {
    stripAvif(file, true);
    return "accepted";
  } catch (err) {
    if (!(err instanceof MalformedImageError)) throw err;
    expect(file.equals(before)).toBe(true);
    return err.message;
  }
}
function expectRefusals(rows: [rule: string, file: Buffer, what: string][]) {
  for (const [rule, file, what] of rows) expect([rule, refusal(file)]).toEqual([rule, R(what)]);
}
const withItems = (items: Item[], o: Layout = {}, p: Placement = {}) => avif(children(items, o), p);
/** The standard picture + EXIF + XMP file, laid out as `o` and `p` say. */
const std = (o: Layout = {}, p: Placement = {}) => withItems(ITEMS, o, p);

describe("the output", () => {
  test("EXIF and XMP: their entries gone from iloc, iinf, iref and ipma, their bytes zeroed, a free box after meta", () => {
    expectStrip(ITEMS);
    // The same spelled out: the meta the picture alone would have, then free, at offset 64.
    const out = stripAvif(std(), false);
    const newMeta = meta([HDLR, pitm(1), iloc([PICTURE]), iinf([infe(PICTURE)]), iprp(ipma([[1, [1]]]))]);
    expect(out.subarray(META_AT, META_AT + newMeta.length).equals(newMeta)).toBe(true);
    expect(out.readUInt32BE(META_AT + newMeta.length)).toBe(std().length - META_AT - newMeta.length);
    expect(out.toString("latin1", META_AT + newMeta.length + 4, META_AT + newMeta.length + 8)).toBe("free");
  });

  test("nothing to strip: the very same buffer, with or without reuseSource", () => {
    const noIinf = avif([HDLR, pitm(1)]);
    for (const file of [withItems([PICTURE]), noIinf, withItems([PICTURE, { id: 5, type: "mime", content: "text/plain" }])]) {
      const before = Buffer.from(file);
      expect(stripAvif(file, false)).toBe(file);
      expect(stripAvif(file, true)).toBe(file);
      expect(file.equals(before)).toBe(true);
    }
  });

  test("XMP is a mime item of application/rdf+xml or application/xmp+xml, in any case and with blanks around", () => {
    const items: Item[] = [
      PICTURE,
      EXIF,
      { ...XMP, content: " Application/XMP+XML " },
      { id: 5, type: "mime", content: "APPLICATION/RDF+XML", extents: [[48, 4]], gone: true },
      { id: 6, type: "mime", content: "text/plain" },
    ];
    expectStrip(items);
  });

  test("references between kept items stay; iref without any left is dropped; ipma with 15-bit indexes", () => {
    const refs: Ref[] = [
      ["cdsc", 2, [1]],
      ["thmb", 4, [1]],
      ["cdsc", 3, [1, 4]],
    ];
    expectStrip([PICTURE, EXIF, XMP, THUMB], {
      refs,
      ipmaFlags: 1,
      ipma: [
        [1, [0x8001, 2]],
        [2, [1]],
        [4, [1]],
        [3, []],
      ],
    });
  });

  test("32-bit item ids everywhere: iinf 1, infe 3, iloc 2, pitm/iref/ipma 1", () => {
    const big = (i: Item): Item => ({ ...i, id: i.id + 0x10000 });
    const items = [PICTURE, big(EXIF), big(XMP)];
    const refs: Ref[] = items.slice(1).map((i): Ref => ["cdsc", i.id, [1]]);
    expectStrip(items, { iinfVersion: 1, infeVersion: 3, ilocVersion: 2, idVersion: 1, refs });
  });

  test("iloc's versions and field widths: base offsets, 8-byte fields, index fields, version 0's reserved nibble, offsets of 0 bytes", () => {
    const based = (i: Item): Item => ({ ...i, base: i.extents![0]![0] - 2 });
    expectStrip(ITEMS, { reserved: 3 }); // version 0 has no index_size: the nibble is ignored
    expectStrip(ITEMS.map(based), { ilocVersion: 1, offsetSize: 8, lengthSize: 8, baseSize: 8, indexSize: 4 });
    expectStrip(
      ITEMS.map((i) => ({ ...i, base: i.extents![0]![0] })),
      { ilocVersion: 2, offsetSize: 0, baseSize: 4, indexSize: 8 },
    );
    expectStrip(ITEMS.map(based), { ilocVersion: 1, baseSize: 4 });
  });

  test("a largesize meta is rebuilt with a 32-bit size", () => {
    expectStrip(ITEMS, {}, { metaBox: (c) => largeBox("meta", u8(0, 0, 0, 0), ...c) });
  });

  test("without pitm, iloc or iref there is nothing to check or zero, and iinf and ipma still lose the items", () => {
    const original = avif([
      HDLR,
      iinf(ITEMS.map((i) => infe(i))),
      iprp(
        ipma([
          [1, [1]],
          [2, [1]],
        ]),
      ),
    ]);
    const newMeta = meta([HDLR, iinf([infe(PICTURE)]), iprp(ipma([[1, [1]]]))]);
    expectOutput(original, Buffer.concat([FTYP, MDAT, newMeta, freeBox(original.length - META_AT - newMeta.length)]));
  });

  test("meta's other children are copied as they are: grpl without metadata, dinf, free, skip", () => {
    const extra = [box("grpl", group(16, [1]), group(17, [1, 4])), box("dinf", box("dref")), freeBox(12), box("skip")];
    expectStrip(ITEMS, { extra });
  });

  test("metadata in idat (construction method 1) is zeroed there, kept idat data is not", () => {
    const idat = Buffer.concat([Buffer.alloc(6, 0xe2), Buffer.alloc(4, 0xb4)]);
    const items: Item[] = [PICTURE, { ...EXIF, method: 1, extents: [[0, 6]] }, { ...THUMB, method: 1, extents: [[6, 4]] }, XMP];
    const zeroedMdat = box("mdat", PIC, Buffer.alloc(8, 0xe2), Buffer.alloc(8));
    expectStrip(
      items,
      { ilocVersion: 1, extra: [box("idat", idat)] },
      { zeroedBefore: [zeroedMdat], kept: { ilocVersion: 1, extra: [box("idat", Buffer.alloc(6), Buffer.alloc(4, 0xb4))] } },
    );
  });

  test("kept items are not looked into when their data is elsewhere, without idat or empty at the very end", () => {
    const elsewhere: Item[] = [
      { id: 5, type: "av01", dref: 1, extents: [[999_999, 5]] },
      { id: 6, type: "av01", method: 2, extents: [[999_999, 5]] },
      { id: 7, type: "av01", method: 1, extents: [[999_999, 5]] },
    ];
    const items = (end: number): Item[] => [...ITEMS, ...elsewhere, { id: 8, type: "av01", extents: [[end, 0]] }];
    const length = withItems(items(0), { ilocVersion: 1 }).length;
    expectStrip(items(length), { ilocVersion: 1 });
  });

  test("metadata in a second mdat; 64 mdats in all", () => {
    const two = [box("mdat", PIC), box("mdat", Buffer.alloc(8, 0xe2), Buffer.alloc(8, 0xd3))];
    const items = [PICTURE, { ...EXIF, extents: [[56, 8]] as Extent[] }, { ...XMP, extents: [[64, 8]] as Extent[] }];
    expectStrip(items, {}, { before: two, zeroedBefore: [box("mdat", PIC), box("mdat", Buffer.alloc(16))] });
    expectStrip(ITEMS, {}, { after: Array.from({ length: 63 }, () => box("mdat")) });
  });

  test("4096 extents in all are read", () => {
    expectStrip([{ ...PICTURE, extents: Array.from({ length: 4094 }, (): Extent => [32, 16]) }, EXIF, XMP]);
  });

  test("top-level box forms: an empty box, a 16-byte largesize box, skip, a size-0 box to the end", () => {
    expectStrip(ITEMS, {}, { after: [u32(1), text("free"), u64(16)] });
    expectStrip(ITEMS, {}, { after: [box("skip", u8(1)), u32(0), text("free")] });
    expectStrip(ITEMS, {}, { after: [box("free"), u32(0), text("skip"), u8(7, 7)] });
  });
});

/** A moov whose user data sits at every container level, and a track header (not a container) whose body is no boxes. */
const moovTree = (udta: (n: number) => Buffer) =>
  box(
    "moov",
    udta(1),
    box(
      "trak",
      box("tkhd", u8(0xff, 0xff, 0xff)),
      box("mdia", udta(2), box("minf", udta(3), box("stbl", udta(4)), box("dinf", udta(5)))),
      box("edts", udta(6)),
    ),
    box("mvex", udta(7)),
  );
const secret = (n: number) => text(`KuraSecretPlace${n}`);
const udta = (n: number) => box("udta", secret(n));
const emptied = (n: number) => box("free", Buffer.alloc(secret(n).length));
/** moov → trak → … → udta with `containers` boxes around the udta. */
const nested = (containers: number) => {
  let b = udta(0);
  for (let i = 1; i < containers; i++) b = box("trak", b);
  return box("moov", b);
};
const nestedEmptied = (containers: number) => {
  let b = emptied(0);
  for (let i = 1; i < containers; i++) b = box("trak", b);
  return box("moov", b);
};

describe("moov's user data", () => {
  test("udta at every container level becomes free, zeroed; meta untouched when it holds no metadata", () => {
    const still = withItems([PICTURE]);
    expectOutput(Buffer.concat([still, moovTree(udta)]), Buffer.concat([still, moovTree(emptied)]));
    expectOutput(Buffer.concat([still, nested(8)]), Buffer.concat([still, nestedEmptied(8)]));
  });

  test("without metadata items only iinf is read: an iloc of an unknown version does not matter", () => {
    const still = withItems([PICTURE], { ilocVersion: 3 });
    expectOutput(Buffer.concat([still, nested(2)]), Buffer.concat([still, nestedEmptied(2)]));
  });

  test("with metadata items too: both edits", () => {
    expectStrip(ITEMS, {}, { after: [moovTree(udta)], zeroedAfter: [moovTree(emptied)] });
  });

  test("refused: nesting deeper than 8, a meta or uuid in a track, a size-0 box inside", () => {
    const still = withItems([PICTURE]);
    expectRefusals([
      ["9 containers deep", Buffer.concat([still, nested(9)]), "嵌套过深"],
      ["meta in a track", Buffer.concat([still, box("moov", box("trak", fullBox("meta", 0, 0)))]), "轨道中的 meta"],
      ["uuid in a track", Buffer.concat([still, box("moov", box("trak", box("uuid", Buffer.alloc(16))))]), "轨道中的 meta"],
      ["size 0 inside moov", Buffer.concat([still, box("moov", u32(0), text("trak"))]), "盒子长度无效"],
    ]);
  });
});

describe("refusals, each with its message, the source untouched", () => {
  test("box headers and the top level", () => {
    const infes = ITEMS.map((i) => infe(i));
    const lastAt = (parent: Buffer, child: Buffer) => parent.length - child.length;
    const ipmaBox = ipma([[1, [1]]]);
    const groups = box("grpl", group(1, [1]), group(2, [1]));
    expectRefusals([
      ["3 bytes after the last box", std({}, { after: [u8(0, 0, 0)] }), "盒子头不完整"],
      ["a largesize header cut short", std({}, { after: [u32(1), text("free"), u32(0)] }), "盒子头不完整"],
      ["a largesize past the end", std({}, { after: [u32(1), text("free"), u64(17)] }), "盒子长度无效"],
      ["a size below 8", std({}, { after: [u32(7), text("free")] }), "盒子长度无效"],
      ["a box past the end", std({}, { after: [u32(20), text("free"), u32(0)] }), "盒子长度无效"],
      ["a uuid box shorter than its 24-byte header", std({}, { after: [u32(20), text("uuid"), Buffer.alloc(12)] }), "盒子长度无效"],
      ["a uuid box at the top level", std({}, { after: [box("uuid", Buffer.alloc(16))] }), "未知的顶层盒子"],
      ["size 0 inside meta", std({ extra: [u32(0), text("free")] }), "盒子长度无效"],
      ["size 0 inside iinf", std({ replace: { iinf: iinf([infes[0]!, infes[1]!, sizeAt(infes[2]!, 0, 0)]) } }), "盒子长度无效"],
      [
        "size 0 inside iref",
        std({
          replace: {
            iref: sizeAt(
              iref([
                ["cdsc", 2, [1]],
                ["cdsc", 3, [1]],
              ]),
              26,
              0,
            ),
          },
        }),
        "盒子长度无效",
      ],
      ["size 0 inside iprp", std({ replace: { iprp: sizeAt(iprp(ipmaBox), lastAt(iprp(ipmaBox), ipmaBox), 0) } }), "盒子长度无效"],
      ["size 0 inside grpl", std({ extra: [sizeAt(groups, lastAt(groups, group(2, [1])), 0)] }), "盒子长度无效"],
      ["an empty file", Buffer.alloc(0), "缺少 ftyp"],
      ["ftyp not first", Buffer.concat([MDAT, FTYP, meta(children(ITEMS))]), "缺少 ftyp"],
      ["an unknown top-level box", std({}, { after: [box("junk")] }), "未知的顶层盒子"],
      ["no meta", Buffer.concat([FTYP, MDAT]), "meta 盒子数量不对"],
      ["two metas", std({}, { after: [meta(children(ITEMS))] }), "meta 盒子数量不对"],
      ["meta version 1", std({}, { metaBox: (c) => fullBox("meta", 1, 0, ...c) }), "meta 版本未知"],
      ["meta without its version", Buffer.concat([FTYP, box("meta"), MDAT]), "meta 版本未知"],
      ["meta of its version only", Buffer.concat([FTYP, MDAT, fullBox("meta", 0, 0)]), "meta 缺少 hdlr"],
      ["hdlr not first", avif([pitm(1), HDLR, iloc(ITEMS), iinf(infes)]), "meta 缺少 hdlr"],
      ["an unknown meta child", std({ extra: [box("xml ")] }), "未知的 meta 子盒子"],
      ["two ilocs", std({ extra: [iloc(ITEMS)] }), "重复的 iloc"],
      ["two iinfs", std({ extra: [iinf(infes)] }), "重复的 iinf"],
    ]);
  });

  test("fields: bounds, 64-bit values, strings", () => {
    const at = (offset: number): Item[] => [{ ...PICTURE, extents: [[offset, 16]] }, EXIF, XMP];
    const unterminated = (id: number, type: string) => fullBox("infe", 2, 0, u16(id), u16(0), text(type), text("name"));
    const infes = ITEMS.map((i) => infe(i));
    expectRefusals([
      ["pitm without its item id", std({ replace: { pitm: fullBox("pitm", 0, 0) } }), "字段越界"],
      ["an offset above 2^53 - 1", withItems(at(2 ** 53), { offsetSize: 8 }), "偏移量过大"],
      ["an offset of 2^53 - 1", withItems(at(2 ** 53 - 1), { offsetSize: 8 }), "数据范围越界"],
      [
        "an item name whose NUL is the next box's first byte",
        std({ replace: { iinf: iinf([infes[0]!, unterminated(2, "Exif"), infes[2]!]) } }),
        "字符串未结束",
      ],
      ["an item name without NUL to the end of the file", avif([HDLR, iloc(ITEMS), iinf([infes[0]!, infes[1]!, unterminated(3, "mime")])]), "字符串未结束"],
    ]);
  });

  test("iloc, iinf, iref, ipma", () => {
    const infes = ITEMS.map((i) => infe(i));
    const refWithByte = fullBox("iref", 0, 0, box("cdsc", u16(2, 1, 1), u8(0)));
    expectRefusals([
      ["iloc version 3", std({ ilocVersion: 3 }), "iloc 版本未知"],
      ["iloc offsets of 2 bytes", std({ offsetSize: 2 }), "iloc 字段宽度无效"],
      ["iloc index fields of 3 bytes", std({ ilocVersion: 1, indexSize: 3 }), "iloc 字段宽度无效"],
      ["a byte after iloc's entries", std({ replace: { iloc: grow(iloc(ITEMS), u8(0)) } }), "iloc 长度不符"],
      ["iinf counting 2 of 3", std({ replace: { iinf: iinf(infes, 0, 2) } }), "iinf 条目不符"],
      ["iinf holding a box other than infe", std({ replace: { iinf: iinf([infes[0]!, infes[1]!, box("free")]) } }), "iinf 条目不符"],
      ["infe version 1", std({ infeVersion: 1 }), "infe 版本未知"],
      ["infe version 4", std({ infeVersion: 4 }), "infe 版本未知"],
      ["two items of one id", withItems([PICTURE, EXIF, { ...XMP, id: 2 }]), "重复的条目编号"],
      ["iref version 2", std({ replace: { iref: fullBox("iref", 2, 0) } }), "iref 版本未知"],
      ["a byte after a reference's targets", std({ replace: { iref: refWithByte } }), "iref 长度不符"],
      ["ipma version 2", std({ replace: { iprp: iprp(fullBox("ipma", 2, 0, u32(0))) } }), "ipma 版本未知"],
      ["a byte after ipma's entries", std({ replace: { iprp: iprp(grow(ipma([[1, [1]]]), u8(0))) } }), "ipma 长度不符"],
      ["an ipma entry running past ipma", std({ replace: { iprp: iprp(fullBox("ipma", 0, 0, u32(2), u16(1), u8(200), u8(1))) } }), "ipma 长度不符"],
    ]);
  });

  test("what points at a metadata item: pitm, a group, a reference from a kept item", () => {
    const refs = (...r: Ref[]) => ({ refs: r });
    expectRefusals([
      ["pitm at the EXIF item", std({ replace: { pitm: pitm(2) } }), "主图是元数据条目"],
      ["pitm version 1 at the EXIF item", std({ replace: { pitm: pitm(2, 1) } }), "主图是元数据条目"],
      ["a group holding the XMP item", std({ extra: [box("grpl", group(16, [1]), group(17, [1, 3]))] }), "元数据条目属于实体组"],
      ["the picture referring to XMP", std(refs(["cdsc", 2, [1]], ["auxl", 1, [3]])), "图像引用元数据条目"],
      ["the picture referring to a kept item and EXIF", withItems([...ITEMS, THUMB], refs(["dimg", 1, [4, 2]])), "图像引用元数据条目"],
    ]);
  });

  test("where the items' data is", () => {
    const exifAt = (e: Partial<Item>, o: Layout = {}, p: Placement = {}) => withItems([PICTURE, { ...EXIF, ...e }, XMP], o, p);
    const pictureAt = (e: Partial<Item>) => withItems([{ ...PICTURE, ...e }, EXIF, XMP]);
    const idat = { ilocVersion: 1, extra: [box("idat", Buffer.alloc(10, 0xe2))] };
    // meta before mdat (so a kept extent "to the end" does not cover meta): offsets from the mdat data's start d.
    const items = (d: number): Item[] => [
      { ...PICTURE, extents: [[d, 0]] },
      { ...EXIF, extents: [[d + 16, 8]] },
      { ...XMP, extents: [[d + 24, 8]] },
    ];
    const metaFirst = Buffer.concat([FTYP, meta(children(items(FTYP.length + meta(children(items(0))).length + 8))), MDAT]);
    expectRefusals([
      ["two iloc entries for one item", avif(children(ITEMS, { replace: { iloc: iloc([PICTURE, PICTURE, EXIF, XMP]) } })), "重复的 iloc 条目"],
      ["4097 extents", pictureAt({ extents: Array.from({ length: 4095 }, (): Extent => [32, 16]) }), "数据片段过多"],
      ["65 mdats", std({}, { after: Array.from({ length: 64 }, () => box("mdat")) }), "mdat 过多"],
      ["metadata in another file (data_reference_index 1)", exifAt({ dref: 1 }), "元数据条目的数据在别处"],
      ["metadata by construction method 2", exifAt({ method: 2 }, { ilocVersion: 1 }), "元数据条目的数据在别处"],
      ["construction method 3 (iloc version 1)", withItems([{ ...PICTURE, method: 3 }, EXIF, XMP], { ilocVersion: 1 }), "未知的构造方法"],
      ["metadata in idat without an idat", exifAt({ method: 1, extents: [[0, 6]] }, { ilocVersion: 1 }), "缺少 idat"],
      ["idat data past idat's end (not the file's)", exifAt({ method: 1, extents: [[4, 7]] }, idat, { after: [freeBox(16)] }), "数据范围越界"],
      ["picture data past the end of the file", pictureAt({ extents: [[32, 10_000]] }), "数据范围越界"],
      ["picture data starting past the end, to the end", pictureAt({ extents: [[10_000, 0]] }), "数据范围越界"],
      ["picture data inside meta", pictureAt({ extents: [[META_AT + 8, 4]] }), "数据位于 meta 中"],
      ["metadata of length 0 (to the end)", exifAt({ extents: [[48, 0]] }), "元数据条目长度不明"],
      ["metadata in ftyp", exifAt({ extents: [[8, 8]] }), "元数据条目不在 mdat 中"],
      ["metadata in mdat's header", exifAt({ extents: [[24, 8]] }), "元数据条目不在 mdat 中"],
      ["metadata running from mdat into meta", exifAt({ extents: [[60, 8]] }), "元数据条目不在 mdat 中"],
      ["metadata in a free box", exifAt({ extents: [[72, 8]] }, {}, { before: [MDAT, freeBox(16)] }), "元数据条目不在 mdat 中"],
      ["EXIF inside the picture's bytes", exifAt({ extents: [[40, 8]] }), "元数据与图像数据重叠"],
      ["EXIF inside a kept thumbnail's bytes only", withItems([PICTURE, EXIF, XMP, { ...THUMB, extents: [[50, 2]] }]), "元数据与图像数据重叠"],
      ["the picture running to the end, over the metadata", metaFirst, "元数据与图像数据重叠"],
      [
        "EXIF and a kept item sharing idat bytes",
        withItems([PICTURE, { ...EXIF, method: 1, extents: [[0, 6]] }, { ...THUMB, method: 1, extents: [[4, 6]] }, XMP], idat),
        "元数据与图像数据重叠",
      ],
    ]);
  });
});
