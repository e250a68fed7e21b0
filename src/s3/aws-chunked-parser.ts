/**
 * Push parser for `aws-chunked` bodies (see shared/s3/README.md, "aws-chunked framing"):
 *   <hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n[trailer lines\r\n]\r\n
 * Unsigned chunks are passed on as they arrive; a signed chunk is held until its signature verifies,
 * so at most one chunk is ever buffered. All framing errors are S3AuthError.
 */
import { createHash, type Hash } from "node:crypto";
import { S3AuthError } from "./s3-auth-error";
import { checksumCalculator, type ChecksumCalculator } from "./checksums";
import { EMPTY_SHA256, sha256Hex, signaturesEqual, signHex } from "./sigv4-canonical";

/** Longest accepted chunk-size or trailer line (a signed size line is about 100 bytes). */
export const MAX_LINE_BYTES = 1024;
/** Largest signed chunk we hold in memory while its signature is pending. */
export const DEFAULT_MAX_SIGNED_CHUNK = 16 * 1024 * 1024;

export interface ChunkSigning {
  signingKey: Uint8Array;
  scope: string;
  amzDate: string;
  /** The request signature (Authorization header); the first chunk signature chains from it. */
  seedSignature: string;
}

export interface AwsChunkedOptions {
  signed?: ChunkSigning;
  /**
   * The `x-amz-trailer` header value: that checksum trailer is then required and verified (a name we
   * cannot verify is refused up front). `true` accepts any trailers unverified (tests only); false or
   * absent refuses trailers, as S3 does when `x-amz-trailer` was not sent.
   */
  trailerExpected?: boolean | string;
  /** `x-amz-decoded-content-length`: the decoded body must be exactly this long. */
  decodedLength?: number;
  maxSignedChunkBytes?: number;
  /** Called with the parsed trailers (lower-case names, without the trailer signature) before the stream ends. */
  onTrailers?: (trailers: Record<string, string>) => void;
}

const CR = 13;
const LF = 10;
const malformed = (why: string) => new S3AuthError("InvalidRequest", `aws-chunked 分块格式错误：${why}`);

type State = "size" | "data" | "dataEnd" | "trailer" | "done";

export class AwsChunkedParser {
  private state: State = "size";
  private line: number[] = [];
  private remaining = 0;
  private dataEndSeen = 0;
  private chunkSignature = "";
  private previousSignature: string;
  private chunkHash: Hash | undefined;
  private held: Uint8Array[] = [];
  private decoded = 0;
  private readonly trailers: [string, string][] = [];
  private trailerSignature: string | undefined;
  private readonly checksum: ChecksumCalculator | undefined;
  private readonly expectedTrailer: string | undefined;

  constructor(private readonly opts: AwsChunkedOptions) {
    this.previousSignature = opts.signed?.seedSignature.toLowerCase() ?? "";
    this.expectedTrailer = typeof opts.trailerExpected === "string" ? opts.trailerExpected.trim().toLowerCase() : undefined;
    this.checksum = this.expectedTrailer ? checksumCalculator(this.expectedTrailer) : undefined;
    // A declared trailer we cannot compute would be required but never checked: the client would
    // believe its data was verified.
    if (this.expectedTrailer && !this.checksum) {
      throw new S3AuthError("InvalidRequest", `不支持 x-amz-trailer 中声明的 ${this.expectedTrailer}，只支持 x-amz-checksum-* 校验和`);
    }
  }

  /** Consume one network piece; decoded data ready to pass on is pushed to `out`. */
  feed(bytes: Uint8Array, out: Uint8Array[]): void {
    let i = 0;
    while (i < bytes.length) {
      switch (this.state) {
        case "size":
        case "trailer": {
          const end = this.collectLine(bytes, i);
          if (end < 0) return;
          i = end;
          const line = Buffer.from(this.line).toString("latin1");
          this.line = [];
          if (this.state === "size") this.onSizeLine(line);
          else this.onTrailerLine(line);
          break;
        }
        case "data": {
          const take = Math.min(this.remaining, bytes.length - i);
          this.onData(bytes.subarray(i, i + take), out);
          i += take;
          this.remaining -= take;
          if (this.remaining === 0) this.state = "dataEnd";
          break;
        }
        case "dataEnd": {
          const expected = this.dataEndSeen === 0 ? CR : LF;
          if (bytes[i] !== expected) throw malformed("分块数据后缺少 CRLF");
          i++;
          if (++this.dataEndSeen === 2) {
            this.dataEndSeen = 0;
            this.finishDataChunk(out);
            this.state = "size";
          }
          break;
        }
        case "done":
          throw malformed("结束标记之后还有多余数据");
      }
    }
  }

  /** The body ended: anything short of a complete, verified message is an error. */
  finish(): void {
    if (this.state !== "done") throw new S3AuthError("IncompleteBody", "请求体不完整：aws-chunked 数据提前结束");
    if (this.opts.decodedLength !== undefined && this.decoded !== this.opts.decodedLength) {
      throw new S3AuthError("IncompleteBody", "解码后的长度与 x-amz-decoded-content-length 不一致");
    }
  }

  /** Append bytes up to and including CRLF to `this.line`; returns the index after LF, or -1 if more input is needed. */
  private collectLine(bytes: Uint8Array, start: number): number {
    for (let i = start; i < bytes.length; i++) {
      const b = bytes[i] as number;
      if (b === LF) {
        if (this.line.at(-1) !== CR) throw malformed("行尾必须是 CRLF");
        this.line.pop();
        return i + 1;
      }
      this.line.push(b);
      if (this.line.length > MAX_LINE_BYTES) throw malformed("分块头或尾部行过长");
    }
    return -1;
  }

  private onSizeLine(line: string): void {
    const semi = line.indexOf(";");
    const hex = semi < 0 ? line : line.slice(0, semi);
    if (!/^[0-9a-fA-F]{1,13}$/.test(hex)) throw malformed("分块大小不是有效的十六进制数");
    const size = Number.parseInt(hex, 16);
    if (this.opts.signed) {
      const m = /^;chunk-signature=([0-9a-f]{64})$/.exec(semi < 0 ? "" : line.slice(semi));
      if (!m) throw new S3AuthError("SignatureDoesNotMatch", "签名分块缺少有效的 chunk-signature");
      this.chunkSignature = m[1] as string;
      const max = this.opts.maxSignedChunkBytes ?? DEFAULT_MAX_SIGNED_CHUNK;
      if (size > max) throw malformed("签名分块过大");
    }
    if (this.opts.decodedLength !== undefined && this.decoded + size > this.opts.decodedLength) {
      throw malformed("数据超过了 x-amz-decoded-content-length");
    }
    if (size === 0) {
      this.verifyChunk(EMPTY_SHA256);
      this.state = "trailer";
      return;
    }
    this.remaining = size;
    this.chunkHash = this.opts.signed ? createHash("sha256") : undefined;
    this.state = "data";
  }

  private onData(piece: Uint8Array, out: Uint8Array[]): void {
    this.decoded += piece.length;
    this.checksum?.update(piece);
    if (this.chunkHash) {
      this.chunkHash.update(piece);
      // Copy: the caller may reuse its buffer, and we hold this until the signature checks out.
      this.held.push(Uint8Array.from(piece));
    } else {
      out.push(piece);
    }
  }

  private finishDataChunk(out: Uint8Array[]): void {
    if (!this.chunkHash) return;
    this.verifyChunk(this.chunkHash.digest("hex"));
    this.chunkHash = undefined;
    out.push(...this.held);
    this.held = [];
  }

  /** Chunk string to sign: AWS4-HMAC-SHA256-PAYLOAD, date, scope, previous signature, hash(""), hash(data). */
  private verifyChunk(dataHashHex: string): void {
    const s = this.opts.signed;
    if (!s) return;
    const toSign = ["AWS4-HMAC-SHA256-PAYLOAD", s.amzDate, s.scope, this.previousSignature, EMPTY_SHA256, dataHashHex].join("\n");
    const expected = signHex(s.signingKey, toSign);
    if (!signaturesEqual(expected, this.chunkSignature)) throw new S3AuthError("SignatureDoesNotMatch", "分块签名不匹配，数据可能被篡改");
    this.previousSignature = expected;
  }

  private onTrailerLine(line: string): void {
    if (line === "") {
      this.finishTrailers();
      this.state = "done";
      return;
    }
    // S3 answers MalformedTrailerError here: x-amz-trailer is required whenever trailers are sent, and
    // a checksum nobody declared would otherwise be accepted without being checked.
    if (!this.opts.trailerExpected) throw new S3AuthError("MalformedTrailerError", "请求未声明 x-amz-trailer，却带有尾部字段");
    if (this.trailerSignature !== undefined) throw new S3AuthError("MalformedTrailerError", "x-amz-trailer-signature 之后不能再有尾部字段");
    const colon = line.indexOf(":");
    if (colon <= 0) throw new S3AuthError("MalformedTrailerError", "尾部字段格式错误");
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "x-amz-trailer-signature") this.trailerSignature = value;
    else this.trailers.push([name, value]);
    if (this.trailers.length > 16) throw new S3AuthError("MalformedTrailerError", "尾部字段过多");
  }

  private finishTrailers(): void {
    if (!this.opts.trailerExpected) return;
    if (this.trailers.length === 0) throw new S3AuthError("MalformedTrailerError", "请求声明了 x-amz-trailer，但没有发送尾部字段");
    if (this.opts.signed) this.verifyTrailerSignature();
    const record = Object.fromEntries(this.trailers);
    if (this.expectedTrailer) {
      const sent = record[this.expectedTrailer];
      if (sent === undefined) throw new S3AuthError("MalformedTrailerError", `缺少声明的尾部字段 ${this.expectedTrailer}`);
      if (this.checksum && this.checksum.digestBase64() !== sent) {
        throw new S3AuthError("BadDigest", `${this.expectedTrailer} 校验和与收到的数据不一致`);
      }
    }
    this.opts.onTrailers?.(record);
  }

  /**
   * Signed trailers: AWS4-HMAC-SHA256-TRAILER, date, scope, last chunk signature, hash of the trailer
   * lines each written as `name:value\n`. No captured client sends this mode; it follows AWS's spec.
   */
  private verifyTrailerSignature(): void {
    const s = this.opts.signed as ChunkSigning;
    if (this.trailerSignature === undefined) throw new S3AuthError("SignatureDoesNotMatch", "签名的尾部缺少 x-amz-trailer-signature");
    const canonical = this.trailers.map(([k, v]) => `${k}:${v}\n`).join("");
    const toSign = ["AWS4-HMAC-SHA256-TRAILER", s.amzDate, s.scope, this.previousSignature, sha256Hex(canonical)].join("\n");
    if (!signaturesEqual(signHex(s.signingKey, toSign), this.trailerSignature)) {
      throw new S3AuthError("SignatureDoesNotMatch", "尾部签名不匹配，数据可能被篡改");
    }
  }
}
