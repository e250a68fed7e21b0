/**
 * Incremental calculators for the flexible checksums S3 clients send (`x-amz-checksum-*` headers and
 * aws-chunked trailers). Values are base64 of the big-endian digest, as on the wire
 * (e.g. the SDK's `x-amz-checksum-crc32:XejPBA==`). Every algorithm S3 offers is computed here, so
 * no checksum a client sent is ever passed on unverified.
 *
 * The CRCs are written out rather than imported: the digest must be synchronous (the aws-chunked
 * parser checks a trailer while it parses), and the one maintained CRC64-NVME package,
 * `@aws-sdk/crc64-nvme`, is now a re-export of `@aws-sdk/checksums` (which brings `@aws-sdk/core` and
 * `@smithy/core` into the server) with only an async `digest()`. test/s3/checksums.test.ts pins the
 * CRC64-NVME here to published check values and to the AWS SDK's own implementation.
 */
import { createHash, type Hash } from "node:crypto";

export interface ChecksumCalculator {
  update(data: Uint8Array): void;
  digestBase64(): string;
}

function crcTable(poly: number): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? poly ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}

const TABLES = { crc32: crcTable(0xedb88320), crc32c: crcTable(0x82f63b78) };

class Crc implements ChecksumCalculator {
  private crc = 0xffffffff;
  constructor(private readonly table: Uint32Array) {}
  update(data: Uint8Array): void {
    let c = this.crc;
    for (let i = 0; i < data.length; i++) c = (this.table[(c ^ (data[i] as number)) & 0xff] as number) ^ (c >>> 8);
    this.crc = c;
  }
  digestBase64(): string {
    const out = Buffer.alloc(4);
    out.writeUInt32BE((this.crc ^ 0xffffffff) >>> 0);
    return out.toString("base64");
  }
}

/** Two 256-entry halves (high, low 32 bits) of a reflected CRC-64 table: JS bit operations are 32-bit. */
function crc64Table(polyHi: number, polyLo: number): { hi: Uint32Array; lo: Uint32Array } {
  const hi = new Uint32Array(256);
  const lo = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let h = 0;
    let l = n;
    for (let k = 0; k < 8; k++) {
      const carry = l & 1;
      l = (l >>> 1) | ((h & 1) << 31);
      h >>>= 1;
      if (carry) {
        h ^= polyHi;
        l ^= polyLo;
      }
    }
    hi[n] = h >>> 0;
    lo[n] = l >>> 0;
  }
  return { hi, lo };
}

/** CRC-64/NVME (S3's CRC64NVME): reflected polynomial 0x9a6c9329ac4bc9b5, init and xor-out all ones. */
const CRC64_NVME = crc64Table(0x9a6c9329, 0xac4bc9b5);

class Crc64 implements ChecksumCalculator {
  private hi = 0xffffffff;
  private lo = 0xffffffff;
  constructor(private readonly table: { hi: Uint32Array; lo: Uint32Array }) {}
  update(data: Uint8Array): void {
    const { hi: tHi, lo: tLo } = this.table;
    let h = this.hi;
    let l = this.lo;
    for (let i = 0; i < data.length; i++) {
      const idx = (l ^ (data[i] as number)) & 0xff;
      l = ((l >>> 8) | (h << 24)) ^ (tLo[idx] as number);
      h = (h >>> 8) ^ (tHi[idx] as number);
    }
    this.hi = h;
    this.lo = l;
  }
  digestBase64(): string {
    const out = Buffer.alloc(8);
    out.writeUInt32BE((this.hi ^ 0xffffffff) >>> 0, 0);
    out.writeUInt32BE((this.lo ^ 0xffffffff) >>> 0, 4);
    return out.toString("base64");
  }
}

class Digest implements ChecksumCalculator {
  private readonly hash: Hash;
  constructor(algorithm: "sha1" | "sha256") {
    this.hash = createHash(algorithm);
  }
  update(data: Uint8Array): void {
    this.hash.update(data);
  }
  digestBase64(): string {
    return this.hash.digest("base64");
  }
}

/**
 * A calculator for a checksum header name such as `x-amz-checksum-crc32`, or undefined when the name
 * is no checksum algorithm (`x-amz-checksum-type`, `-mode`, `-algorithm` are headers of that prefix too).
 */
export function checksumCalculator(headerName: string): ChecksumCalculator | undefined {
  switch (headerName.toLowerCase()) {
    case "x-amz-checksum-crc32":
      return new Crc(TABLES.crc32);
    case "x-amz-checksum-crc32c":
      return new Crc(TABLES.crc32c);
    case "x-amz-checksum-crc64nvme":
      return new Crc64(CRC64_NVME);
    case "x-amz-checksum-sha1":
      return new Digest("sha1");
    case "x-amz-checksum-sha256":
      return new Digest("sha256");
    default:
      return undefined;
  }
}
