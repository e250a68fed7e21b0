// Properties of the picture-keeping metadata strips (audit 13 HIGH-2, MED-1): the AVIF item edit
// and the gain-map JPEG walk must show the same picture afterwards, not only avoid crashing.
//  - any AVIF structure other writers produce (helpers/avif.ts, drawn at random) is accepted, loses
//    its EXIF/XMP and decodes to the same pixels with the same colour and HDR boxes;
//  - a damaged AVIF the edit still accepts decodes as the damaged input did (when it decodes);
//  - a gain-map JPEG in any of the layouts seen in the wild keeps its HDR rendition;
//  - the hdrgm XMP filter and the MPF reader answer anything in bounded time, and the filter's
//    output holds only whitelisted names with numeric values.
import { beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import sharp from "sharp";
import { stripMetadataBytes } from "../../src/images/exif";
import { hdrgmXmp, readMpf } from "../../src/images/exif-gainmap";
import { type Av1Image, av1Image, type AvifSpec, buildAvif, findBox } from "../helpers/avif";
import { GAIN_MAP_XMP, googlePrimaryXmp, hdrRendition, jpegSegment, primaryOnly, reassemble, ultraHdr, xmpSegment } from "../helpers/gainmap";
import { SECRET_STRINGS, SECRET_XMP, secretExif } from "../helpers/metadata";
import { fuzzParams, hostileString, PARSER_BLOCK_MS, timedCall } from "./fuzz-support";

let images: Av1Image[];
let exif: Buffer;
let made: Buffer;
let preview: Buffer;
beforeAll(async () => {
  images = await Promise.all([av1Image(16, 12, 8), av1Image(12, 16, 10)]);
  exif = await secretExif();
  made = await ultraHdr(true);
  preview = await sharp({ create: { width: 8, height: 8, channels: 3, background: "#0f0" } })
    .jpeg()
    .toBuffer();
});

const avifSpec = fc.record({
  image: fc.nat(1),
  exif: fc.boolean(),
  xmp: fc.boolean(),
  metadataIn: fc.constantFrom("mdat", "idat"),
  metadataFirst: fc.boolean(),
  ilocVersion: fc.constantFrom(0, 1, 2),
  offsetSize: fc.constantFrom(4, 8),
  baseOffset: fc.boolean(),
  iinfVersion: fc.constantFrom(0, 1),
  infeVersion: fc.constantFrom(2, 3),
  ipmaWide: fc.boolean(),
  metadataProperty: fc.boolean(),
  // Matrices libheif converts (14, ICtCp, it does not).
  nclx: fc.option(fc.tuple(fc.integer({ min: 1, max: 22 }), fc.integer({ min: 1, max: 18 }), fc.constantFrom(0, 1, 5, 6, 9), fc.boolean())),
  clli: fc.option(fc.tuple(fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 65535 }))),
  mdcv: fc.boolean(),
  irot: fc.option(fc.integer({ min: 0, max: 3 })),
  imir: fc.option(fc.constantFrom(0, 1)),
  freeAfterMeta: fc.option(fc.integer({ min: 8, max: 64 })),
  largeMdat: fc.boolean(),
});

const pixels = (b: Buffer) => sharp(b).raw().toBuffer();

describe("AVIF item edit", () => {
  test("any writer's layout: accepted, metadata gone, same pixels and colour boxes", async () => {
    await fc.assert(
      fc.asyncProperty(avifSpec, async (drawn) => {
        const spec: AvifSpec = {
          ...drawn,
          image: images[drawn.image],
          exif: drawn.exif ? exif : undefined,
          xmp: drawn.xmp ? SECRET_XMP : undefined,
          nclx: drawn.nclx ?? undefined,
          clli: drawn.clli ?? undefined,
          irot: drawn.irot ?? undefined,
          imir: drawn.imir ?? undefined,
          freeAfterMeta: drawn.freeAfterMeta ?? undefined,
        } as AvifSpec;
        const original = buildAvif(spec);
        const out = stripMetadataBytes(Buffer.from(original), "image/avif").bytes;
        if (!drawn.exif && !drawn.xmp) expect(out.equals(original)).toBe(true);
        expect(out.length).toBe(original.length);
        for (const s of SECRET_STRINGS) expect(out.includes(s)).toBe(false);
        const meta = await sharp(out).metadata();
        expect([meta.exif, meta.xmp]).toEqual([undefined, undefined]);
        expect((await pixels(out)).equals(await pixels(original))).toBe(true);
        for (const type of ["ipco", "av1C", "colr", "pixi", "clli", "mdcv", "irot", "imir"]) {
          expect(findBox(out, type)?.toString("hex")).toBe(findBox(original, type)?.toString("hex"));
        }
      }),
      fuzzParams(0.5),
    );
  });

  test("a damaged AVIF the edit accepts decodes as the damaged input did", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ edits: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), inMeta: fc.boolean() }),
        async ({ edits, inMeta }) => {
          const original = buildAvif({ image: images[0], exif, xmp: SECRET_XMP, nclx: [12, 13, 6, true] });
          const damaged = Buffer.from(original);
          // Mostly inside ftyp and meta, where the parser works; the AV1 payload is copied either way.
          const span = inMeta ? findBox(original, "meta")!.length + 28 : damaged.length;
          for (const [at, value] of edits) damaged[at % span] = value;
          let out: Buffer;
          try {
            out = stripMetadataBytes(Buffer.from(damaged), "image/avif").bytes;
          } catch {
            return; // refused: the upload is re-encoded instead (or rejected when it does not decode)
          }
          expect(out.length).toBe(damaged.length);
          const before = await pixels(damaged).catch(() => undefined);
          if (before === undefined) return;
          expect((await pixels(out)).equals(before)).toBe(true);
          const meta = await sharp(out).metadata();
          expect([meta.exif, meta.xmp]).toEqual([undefined, undefined]);
        },
      ),
      fuzzParams(1),
    );
  });
});

describe("gain-map JPEG", () => {
  test("every layout keeps the HDR rendition and loses the personal metadata", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          noIso: fc.boolean(),
          primaryXmp: fc.boolean(),
          secondaryXmp: fc.boolean(),
          secondaryExif: fc.boolean(),
          extraImage: fc.boolean(),
          trailer: fc.boolean(),
        }),
        async (l) => {
          if (l.noIso && !l.secondaryXmp) return; // no gain-map description at all: not a gain-map file
          const original = reassemble(made, {
            noIso: l.noIso,
            primary: l.primaryXmp || l.noIso ? [xmpSegment(googlePrimaryXmp(1000))] : [],
            secondary: [...(l.secondaryExif ? [jpegSegment(0xe1, exif)] : []), ...(l.secondaryXmp ? [xmpSegment(GAIN_MAP_XMP)] : [])],
            extraImage: l.extraImage ? preview : undefined,
            trailer: l.trailer ? Buffer.from("KuraSecretTrailer") : undefined,
          });
          const out = stripMetadataBytes(Buffer.from(original), "image/jpeg").bytes;
          for (const s of SECRET_STRINGS) expect(out.includes(s)).toBe(false);
          const [a, b, sdr] = await Promise.all([hdrRendition(original), hdrRendition(out), hdrRendition(primaryOnly(out))]);
          expect(b.equals(a)).toBe(true);
          expect(b.equals(sdr)).toBe(false);
        },
      ),
      fuzzParams(0.4),
    );
  });
});

describe("gain-map parsers on hostile input", () => {
  const NAME = /^(Version|BaseRenditionIsHDR|GainMapMin|GainMapMax|Gamma|OffsetSDR|OffsetHDR|HDRCapacityMin|HDRCapacityMax)$/;
  const VALUE = /^(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?|True|False)$/;
  /** The whole packet hdrgmXmp writes: the fixed frame, hdrgm attributes, per-channel sequences. */
  const FRAME =
    /^http:\/\/ns\.adobe\.com\/xap\/1\.0\/\0<x:xmpmeta xmlns:x="adobe:ns:meta\/"><rdf:RDF xmlns:rdf="http:\/\/www\.w3\.org\/1999\/02\/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:hdrgm="http:\/\/ns\.adobe\.com\/hdr-gain-map\/1\.0\/"((?: hdrgm:\w+="[^"<]*")*)(?:\/>|>((?:<hdrgm:(\w+)><rdf:Seq>(?:<rdf:li>[^<]*<\/rdf:li>){3}<\/rdf:Seq><\/hdrgm:\3>)+)<\/rdf:Description>)<\/rdf:RDF><\/x:xmpmeta>$/;
  const xmpInput = fc.oneof(
    hostileString,
    fc
      .array(
        fc.oneof(
          fc.constantFrom(
            'hdrgm:Version="1.0" ',
            'hdrgm:Gamma="',
            "<hdrgm:GainMapMax>",
            "</hdrgm:GainMapMax>",
            "<rdf:Seq>",
            "<rdf:li>",
            "</rdf:li>",
            '"',
            "1.5",
          ),
          hostileString,
        ),
        { maxLength: 40 },
      )
      .map((parts) => `xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" ${parts.join("")}`),
  );

  test("hdrgmXmp: nothing, or a packet of whitelisted names with numeric values", () => {
    fc.assert(
      fc.property(xmpInput, (text) => {
        const { value, error, ms } = timedCall(() => hdrgmXmp(Buffer.from(`http://ns.adobe.com/xap/1.0/\0${text}`, "latin1")));
        expect(error).toBeUndefined();
        expect(ms).toBeLessThan(PARSER_BLOCK_MS);
        if (value === undefined) return;
        const packet = value!.toString("latin1");
        const frame = packet.match(FRAME);
        expect(frame).not.toBeNull();
        for (const m of frame![1].matchAll(/ hdrgm:(\w+)="([^"]*)"/g)) {
          expect(m[1]).toMatch(NAME);
          expect(m[2]).toMatch(VALUE);
        }
        for (const m of (frame![2] ?? "").matchAll(/<hdrgm:(\w+)>|<rdf:li>([^<]*)</g)) expect(m[1] ?? m[2]).toMatch(m[1] ? NAME : VALUE);
      }),
      fuzzParams(5),
    );
  });

  test("readMpf: an image list of at most 16 entries, or nothing, never an exception", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.boolean(), (bytes, prefixed) => {
        const payload = Buffer.concat([Buffer.from(prefixed ? "MPF\0MM\0*\0\0\0\x08" : "", "latin1"), bytes]);
        const { value, error, ms } = timedCall(() => readMpf(payload));
        expect(error).toBeUndefined();
        expect(ms).toBeLessThan(PARSER_BLOCK_MS);
        if (value) expect(value.length).toBeLessThanOrEqual(16);
      }),
      fuzzParams(5),
    );
  });
});
