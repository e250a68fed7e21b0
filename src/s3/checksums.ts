/**
 * Incremental calculators for the flexible checksums S3 clients send (`x-amz-checksum-*` headers and
 * aws-chunked trailers). Values are base64 of the big-endian digest, as on the wire
 * (e.g. the SDK's `x-amz-checksum-crc32:XejPBA==`).
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
 * A calculator for a checksum header name such as `x-amz-checksum-crc32`, or undefined when the
 * algorithm is not one we compute (crc64nvme): such values are passed on unverified.
 */
export function checksumCalculator(headerName: string): ChecksumCalculator | undefined {
  switch (headerName.toLowerCase()) {
    case "x-amz-checksum-crc32":
      return new Crc(TABLES.crc32);
    case "x-amz-checksum-crc32c":
      return new Crc(TABLES.crc32c);
    case "x-amz-checksum-sha1":
      return new Digest("sha1");
    case "x-amz-checksum-sha256":
      return new Digest("sha256");
    default:
      return undefined;
  }
}
