// AVIF metadata strip as a container edit. An AVIF keeps EXIF and XMP as items of the HEIF item
// structure in the top-level `meta` box: an item of type `Exif`, or of type `mime` with the XMP
// content type, declared in `iinf`, located by `iloc` (its bytes usually in `mdat`, sometimes in
// `idat`), linked to the image by an `iref` `cdsc` reference and possibly given properties in `ipma`.
// Removing those entries and zeroing the items' bytes removes the metadata while everything the
// picture needs stays byte for byte: the AV1 payload, `colr` (nclx or ICC), `pixi` (bit depth),
// `clli`/`mdcv` (HDR), `irot`/`imir` (orientation), `ispe`, `av1C`. A re-encode lost all of that.
//
// Nothing after the `meta` box may move, because `iloc` (and an animation's `stco`) hold absolute
// file offsets: the rebuilt, smaller `meta` is followed by a top-level `free` box of the bytes it
// lost, which every ISOBMFF reader skips. The file keeps its size.
//
// Anything this walk does not fully understand is refused (MalformedImageError), and the caller
// re-encodes instead: a box it does not know where it could hold metadata, item data it would
// have to move, references from the picture to a metadata item, overlapping data.
import { MalformedImageError } from "./exif-parts";

interface Box {
  type: string;
  start: number;
  /** First byte after the header (size, type, a largesize, a uuid's 16 bytes). */
  body: number;
  end: number;
}

const refuse = (what: string) => new MalformedImageError(`AVIF 结构无法安全处理：${what}`);

/** The boxes in [from, to), which they must fill exactly. A size of 0 ("to the end") only at the top level. */
function readBoxes(src: Buffer, from: number, to: number, topLevel: boolean): Box[] {
  const boxes: Box[] = [];
  for (let pos = from; pos < to; ) {
    if (pos + 8 > to) throw refuse("盒子头不完整");
    let size = src.readUInt32BE(pos);
    const type = src.toString("latin1", pos + 4, pos + 8);
    let body = pos + 8;
    if (size === 1) {
      if (pos + 16 > to) throw refuse("盒子头不完整");
      const large = src.readBigUInt64BE(pos + 8);
      if (large > BigInt(to - pos)) throw refuse("盒子长度无效");
      size = Number(large);
      body = pos + 16;
    } else if (size === 0) {
      if (!topLevel) throw refuse("盒子长度无效");
      size = to - pos;
    }
    if (type === "uuid") body += 16;
    if (size < body - pos || pos + size > to) throw refuse("盒子长度无效");
    boxes.push({ type, start: pos, body, end: pos + size });
    pos += size;
  }
  return boxes;
}

/** Bounds-checked big-endian reads inside [pos, end). */
class Reader {
  constructor(
    private readonly src: Buffer,
    public pos: number,
    private readonly end: number,
  ) {}
  private need(n: number) {
    if (this.pos + n > this.end) throw refuse("字段越界");
    const at = this.pos;
    this.pos += n;
    return at;
  }
  u8 = () => this.src[this.need(1)];
  u16 = () => this.src.readUInt16BE(this.need(2));
  u32 = () => this.src.readUInt32BE(this.need(4));
  /** An unsigned field of 0, 4 or 8 bytes (iloc's sizes); 0 bytes read as 0. */
  sized(bytes: number): number {
    if (bytes === 0) return 0;
    if (bytes === 4) return this.u32();
    const value = this.src.readBigUInt64BE(this.need(8));
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw refuse("偏移量过大");
    return Number(value);
  }
  fourcc(): string {
    const at = this.need(4);
    return this.src.toString("latin1", at, at + 4);
  }
  /** A NUL-terminated string; the NUL must be inside the field. */
  cstring(): string {
    const nul = this.src.indexOf(0, this.pos);
    if (nul === -1 || nul >= this.end) throw refuse("字符串未结束");
    const text = this.src.toString("utf8", this.pos, nul);
    this.pos = nul + 1;
    return text;
  }
  atEnd = () => this.pos === this.end;
}

/** One byte range of the file (absolute offsets). */
type Range = [start: number, end: number];
const overlaps = (a: Range, b: Range) => a[0] < b[1] && b[0] < a[1];

interface ItemLocation {
  id: number;
  /** The entry's bytes in `iloc`. */
  entry: Range;
  method: number;
  dataReference: number;
  /** Extents relative to the data origin (the file, or idat's data); an end of -1 means "to the end". */
  extents: Range[];
}

function readIloc(src: Buffer, box: Box): { head: Buffer; version: number; items: ItemLocation[] } {
  const r = new Reader(src, box.body, box.end);
  const version = r.u8();
  r.pos += 3; // flags
  if (version > 2) throw refuse("iloc 版本未知");
  const sizes = r.u8();
  const more = r.u8();
  const [offsetSize, lengthSize, baseSize, indexSize] = [sizes >> 4, sizes & 15, more >> 4, version >= 1 ? more & 15 : 0];
  if (![offsetSize, lengthSize, baseSize, indexSize].every((n) => n === 0 || n === 4 || n === 8)) throw refuse("iloc 字段宽度无效");
  const head = src.subarray(box.body, r.pos);
  const count = version < 2 ? r.u16() : r.u32();
  const items: ItemLocation[] = [];
  for (let i = 0; i < count; i++) {
    const start = r.pos;
    const id = version < 2 ? r.u16() : r.u32();
    const method = version >= 1 ? r.u16() & 15 : 0;
    const dataReference = r.u16();
    const base = r.sized(baseSize);
    const extents: Range[] = [];
    for (let n = r.u16(); n > 0; n--) {
      r.sized(indexSize);
      const offset = base + r.sized(offsetSize);
      const length = r.sized(lengthSize);
      extents.push([offset, length === 0 ? -1 : offset + length]);
    }
    items.push({ id, entry: [start, r.pos], method, dataReference, extents });
  }
  if (!r.atEnd()) throw refuse("iloc 长度不符");
  return { head, version, items };
}

/** The item ids of iinf and which of them are EXIF or XMP. */
function readIinf(src: Buffer, box: Box): { version: number; entries: { id: number; box: Box; metadata: boolean }[] } {
  const r = new Reader(src, box.body, box.end);
  const version = r.u8();
  r.pos += 3;
  const count = version === 0 ? r.u16() : r.u32();
  const boxes = readBoxes(src, r.pos, box.end, false);
  if (boxes.length !== count || boxes.some((b) => b.type !== "infe")) throw refuse("iinf 条目不符");
  const entries = boxes.map((infe) => {
    const e = new Reader(src, infe.body, infe.end);
    const v = e.u8();
    e.pos += 3;
    if (v < 2 || v > 3) throw refuse("infe 版本未知");
    const id = v === 2 ? e.u16() : e.u32();
    e.u16(); // protection index
    const type = e.fourcc();
    e.cstring(); // item name
    const contentType = type === "mime" ? e.cstring().trim().toLowerCase() : "";
    const metadata = type === "Exif" || contentType === "application/rdf+xml" || contentType === "application/xmp+xml";
    return { id, box: infe, metadata };
  });
  return { version, entries };
}

/** iref's references: each child box's bytes, its source item and its targets. */
function readIref(src: Buffer, box: Box) {
  const r = new Reader(src, box.body, box.end);
  const version = r.u8();
  r.pos += 3;
  if (version > 1) throw refuse("iref 版本未知");
  return readBoxes(src, r.pos, box.end, false).map((ref) => {
    const c = new Reader(src, ref.body, ref.end);
    const id = () => (version === 0 ? c.u16() : c.u32());
    const from = id();
    const to: number[] = [];
    for (let n = c.u16(); n > 0; n--) to.push(id());
    if (!c.atEnd()) throw refuse("iref 长度不符");
    return { box: ref, from, to };
  });
}

/** ipma's entries: each entry's bytes and its item. */
function readIpma(src: Buffer, box: Box) {
  const r = new Reader(src, box.body, box.end);
  const version = r.u8();
  r.pos += 2;
  const wideIndexes = (r.u8() & 1) === 1; // flags bit 0: property indexes of 15 bits instead of 7
  if (version > 1) throw refuse("ipma 版本未知");
  const entries: { id: number; entry: Range }[] = [];
  for (let n = r.u32(); n > 0; n--) {
    const start = r.pos;
    const id = version === 0 ? r.u16() : r.u32();
    const associations = r.u8();
    r.pos += associations * (wideIndexes ? 2 : 1);
    if (r.pos > box.end) throw refuse("ipma 长度不符");
    entries.push({ id, entry: [start, r.pos] });
  }
  if (!r.atEnd()) throw refuse("ipma 长度不符");
  return entries;
}

/** Entity ids of every group in grpl. */
function grplIds(src: Buffer, box: Box): number[] {
  const ids: number[] = [];
  for (const group of readBoxes(src, box.body, box.end, false)) {
    const r = new Reader(src, group.body + 4, group.end);
    r.u32(); // group id
    for (let n = r.u32(); n > 0; n--) ids.push(r.u32());
  }
  return ids;
}

/** A box with the same type (and FullBox version/flags) as `original`, around `content`; 32-bit size. */
function box(src: Buffer, original: Box, headerExtra: number, content: Buffer[]): Buffer {
  const extra = src.subarray(original.body, original.body + headerExtra);
  const size = 8 + extra.length + content.reduce((n, c) => n + c.length, 0);
  if (size > 0xffffffff) throw refuse("盒子过大");
  const head = Buffer.alloc(8);
  head.writeUInt32BE(size, 0);
  head.write(original.type, 4, "latin1");
  return Buffer.concat([head, extra, ...content]);
}

const slice = (src: Buffer, [start, end]: Range) => src.subarray(start, end);
const count = (n: number, bytes: 2 | 4) => {
  const b = Buffer.alloc(bytes);
  if (bytes === 2) b.writeUInt16BE(n);
  else b.writeUInt32BE(n);
  return b;
};

/** Boxes inside a `moov` that are only containers of other boxes: looked into for user data. */
const MOOV_CONTAINERS = new Set(["moov", "trak", "mdia", "minf", "stbl", "edts", "dinf", "mvex"]);
const TOP_LEVEL = new Set(["ftyp", "meta", "mdat", "moov", "free", "skip"]);
const META_CHILDREN = new Set(["hdlr", "pitm", "iloc", "iinf", "iref", "iprp", "idat", "dinf", "grpl", "free", "skip"]);
/** moov → trak → mdia → minf → stbl is 5 deep; a hostile file nests containers to exhaust the stack. */
const MAX_MOOV_DEPTH = 8;
/**
 * Bounds of the overlap checks, which compare every metadata extent with every picture extent and
 * mdat: real files have a handful of each (a grid image some hundreds), a hostile one could hold
 * hundreds of thousands and keep the loop busy for seconds.
 */
const MAX_EXTENTS = 4096;
const MAX_MDATS = 64;

/**
 * `src` without its EXIF and XMP: `src` itself when it has none, else a copy (or, with
 * `reuseSource`, `src` edited in place) of the same length. Throws MalformedImageError, with `src`
 * untouched, for anything it will not edit.
 */
export function stripAvif(src: Buffer, reuseSource: boolean): Buffer {
  const top = readBoxes(src, 0, src.length, true);
  if (top[0]?.type !== "ftyp") throw refuse("缺少 ftyp");
  if (top.some((b) => !TOP_LEVEL.has(b.type))) throw refuse("未知的顶层盒子");
  const metas = top.filter((b) => b.type === "meta");
  if (metas.length !== 1) throw refuse("meta 盒子数量不对");
  const meta = metas[0];

  // An animation's track may carry user data (udta: encoder, location, XMP): emptied into `free`.
  const userData: Box[] = [];
  const intoMoov = (boxes: Box[], depth: number) => {
    if (depth > MAX_MOOV_DEPTH) throw refuse("嵌套过深");
    for (const b of boxes) {
      if (b.type === "udta") userData.push(b);
      else if (b.type === "meta" || b.type === "uuid") throw refuse("轨道中的 meta");
      else if (MOOV_CONTAINERS.has(b.type)) intoMoov(readBoxes(src, b.body, b.end, false), depth + 1);
    }
  };
  intoMoov(
    top.filter((b) => b.type === "moov"),
    0,
  );

  if (meta.body + 4 > meta.end || src[meta.body] !== 0) throw refuse("meta 版本未知");
  const children = readBoxes(src, meta.body + 4, meta.end, false);
  if (children[0]?.type !== "hdlr") throw refuse("meta 缺少 hdlr");
  const only = (type: string) => {
    const found = children.filter((c) => c.type === type);
    if (found.length > 1) throw refuse(`重复的 ${type}`);
    return found[0];
  };
  if (children.some((c) => !META_CHILDREN.has(c.type))) throw refuse("未知的 meta 子盒子");
  const [ilocBox, iinfBox, irefBox, iprpBox, idatBox, pitmBox, grplBox] = ["iloc", "iinf", "iref", "iprp", "idat", "pitm", "grpl"].map(only);

  const iinf = iinfBox ? readIinf(src, iinfBox) : { version: 0, entries: [] };
  const ids = new Set<number>();
  for (const e of iinf.entries) {
    if (ids.has(e.id)) throw refuse("重复的条目编号");
    ids.add(e.id);
  }
  const removed = new Set(iinf.entries.filter((e) => e.metadata).map((e) => e.id));
  if (removed.size === 0 && userData.length === 0) return src;

  const newChildren: Buffer[] = [];
  const zeroInFile: Range[] = [];
  if (removed.size > 0) {
    if (pitmBox) {
      const r = new Reader(src, pitmBox.body, pitmBox.end);
      const version = r.u8();
      r.pos += 3;
      const primary = version === 0 ? r.u16() : r.u32();
      if (removed.has(primary)) throw refuse("主图是元数据条目");
    }
    if (grplBox && grplIds(src, grplBox).some((id) => removed.has(id))) throw refuse("元数据条目属于实体组");
    const iref = irefBox ? readIref(src, irefBox) : [];
    if (iref.some((ref) => !removed.has(ref.from) && ref.to.some((id) => removed.has(id)))) throw refuse("图像引用元数据条目");
    const iloc = ilocBox ? readIloc(src, ilocBox) : { head: Buffer.alloc(0), version: 0, items: [] };
    if (new Set(iloc.items.map((i) => i.id)).size !== iloc.items.length) throw refuse("重复的 iloc 条目");
    if (iloc.items.reduce((n, i) => n + i.extents.length, 0) > MAX_EXTENTS) throw refuse("数据片段过多");

    // Where each item's bytes are in the file; the metadata items' must be inside an mdat (or idat) and shared with nothing kept.
    const idat: Range | undefined = idatBox && [idatBox.body, idatBox.end];
    const mdats = top.filter((b) => b.type === "mdat").map((b): Range => [b.body, b.end]);
    if (mdats.length > MAX_MDATS) throw refuse("mdat 过多");
    const zeroInIdat: Range[] = [];
    const keptRanges: Range[] = [];
    for (const item of iloc.items) {
      const gone = removed.has(item.id);
      if (item.dataReference !== 0 || item.method === 2) {
        if (gone) throw refuse("元数据条目的数据在别处");
        continue;
      }
      if (item.method !== 0 && item.method !== 1) throw refuse("未知的构造方法");
      const origin = item.method === 0 ? 0 : idat ? idat[0] : -1;
      if (origin < 0) {
        if (gone) throw refuse("缺少 idat");
        continue;
      }
      const limit = item.method === 0 ? src.length : idat![1];
      for (const [s, e] of item.extents) {
        const range: Range = [origin + s, e === -1 ? limit : origin + e];
        if (range[0] > limit || range[1] > limit) throw refuse("数据范围越界");
        if (!gone) {
          // Kept data must not sit inside the meta box we rebuild (other than idat, which moves with its offsets intact).
          if (item.method === 0 && overlaps(range, [meta.start, meta.end])) throw refuse("数据位于 meta 中");
          keptRanges.push(range);
        } else if (e === -1) throw refuse("元数据条目长度不明");
        else if (item.method === 1) zeroInIdat.push([range[0] - idat![0], range[1] - idat![0]]);
        else if (mdats.some((m) => range[0] >= m[0] && range[1] <= m[1])) zeroInFile.push(range);
        else throw refuse("元数据条目不在 mdat 中");
      }
    }
    const zeroed = [...zeroInFile, ...zeroInIdat.map(([s, e]): Range => [s + idat![0], e + idat![0]])];
    if (zeroed.some((z) => keptRanges.some((k) => overlaps(z, k)))) throw refuse("元数据与图像数据重叠");

    for (const child of children) {
      if (child === iinfBox) {
        const kept = iinf.entries.filter((e) => !removed.has(e.id));
        newChildren.push(box(src, child, 4, [count(kept.length, iinf.version === 0 ? 2 : 4), ...kept.map((e) => slice(src, [e.box.start, e.box.end]))]));
      } else if (child === ilocBox) {
        const kept = iloc.items.filter((i) => !removed.has(i.id));
        newChildren.push(box(src, child, 0, [iloc.head, count(kept.length, iloc.version < 2 ? 2 : 4), ...kept.map((i) => slice(src, i.entry))]));
      } else if (child === irefBox) {
        const kept = iref.filter((ref) => !removed.has(ref.from));
        if (kept.length)
          newChildren.push(
            box(
              src,
              child,
              4,
              kept.map((ref) => slice(src, [ref.box.start, ref.box.end])),
            ),
          );
      } else if (child === iprpBox) {
        const parts = readBoxes(src, child.body, child.end, false).map((part) => {
          if (part.type !== "ipma") return slice(src, [part.start, part.end]);
          const kept = readIpma(src, part).filter((e) => !removed.has(e.id));
          return box(src, part, 4, [count(kept.length, 4), ...kept.map((e) => slice(src, e.entry))]);
        });
        newChildren.push(box(src, child, 0, parts));
      } else if (child === idatBox && zeroInIdat.length) {
        const data = Buffer.from(src.subarray(child.body, child.end));
        for (const [s, e] of zeroInIdat) data.fill(0, s, e);
        newChildren.push(box(src, child, 0, [data]));
      } else newChildren.push(slice(src, [child.start, child.end]));
    }
  }

  const newMeta = removed.size > 0 ? box(src, meta, 4, newChildren) : undefined;
  const pad = newMeta ? meta.end - meta.start - newMeta.length : 0;
  if (newMeta && pad < 8) throw refuse("meta 无法缩小");

  // Every check has passed: only now is anything written (into `src` itself with `reuseSource`).
  const out = reuseSource ? src : Buffer.from(src);
  if (newMeta) {
    newMeta.copy(out, meta.start);
    const free = meta.start + newMeta.length;
    out.fill(0, free, meta.end);
    out.writeUInt32BE(pad, free);
    out.write("free", free + 4, "latin1");
    for (const [s, e] of zeroInFile) out.fill(0, s, e);
  }
  for (const b of userData) {
    out.write("free", b.start + 4, "latin1");
    out.fill(0, b.body, b.end);
  }
  return out;
}
