/**
 * What a write's headers ask of the object beyond its bytes (PutObject, CreateMultipartUpload,
 * CopyObject, UploadPart, a browser form's fields), checked before the body is read.
 *
 * S3 features Kura does not have are refused, never dropped: an object sent with a customer key
 * (SSE-C) was stored and then served in clear, on its public /o/ link too; one sent with a retention
 * date or a legal hold could be deleted the next minute; one sent to GLACIER was billed as nothing.
 * What Kura does keep is bounded as AWS bounds it (2 KB of user metadata).
 */
import { S3Error } from "./errors";

type HeaderEntries = Iterable<readonly [string, string]>;

const notImplemented = (what: string) => new S3Error("NotImplemented", `Kura 的 S3 接口不支持${what}，未写入任何内容`);

/**
 * `x-amz-server-side-encryption`: `AES256` (SSE-S3) is accepted. It asks for nothing a client can
 * observe (S3 decrypts for every authorised reader, and AWS encrypts every object so by default),
 * and tools that set it by policy keep working; Kura itself does not encrypt at rest (README). The
 * KMS modes name keys Kura has no service for: 501. Any other value is AWS's 400 InvalidArgument.
 */
function checkEncryption(value: string) {
  const mode = value.trim();
  if (mode === "AES256") return;
  if (mode === "aws:kms" || mode === "aws:kms:dsse") throw notImplemented(`KMS 服务端加密（x-amz-server-side-encryption: ${mode}）`);
  throw new S3Error(
    "InvalidArgument",
    "x-amz-server-side-encryption 的值无效：只支持 AES256",
    400,
    {},
    {
      ArgumentName: "x-amz-server-side-encryption",
      ArgumentValue: mode,
    },
  );
}

/**
 * `x-amz-storage-class`: Kura has one class, STANDARD (what listings say). Any other, a real AWS class
 * included, is 400 InvalidStorageClass, as MinIO answers the classes it does not offer: a client that
 * asked for an archive or infrequent-access tier should learn it did not get one.
 */
function checkStorageClass(value: string) {
  if (value.trim() === "STANDARD") return;
  throw new S3Error("InvalidStorageClass", `Kura 只有 STANDARD 存储类型，不支持 ${value.trim()}`, 400, {}, { StorageClassRequested: value.trim() });
}

/** Refuses a write whose headers ask for encryption with customer or KMS keys, object lock, or another storage class. */
export function refuseUnsupportedFeatures(headers: HeaderEntries): void {
  for (const [rawName, value] of headers) {
    const name = rawName.toLowerCase();
    if (name === "x-amz-server-side-encryption") checkEncryption(value);
    else if (name.startsWith("x-amz-server-side-encryption-customer-") || name.startsWith("x-amz-copy-source-server-side-encryption-customer-")) {
      throw notImplemented("客户提供密钥的服务端加密（SSE-C，x-amz-server-side-encryption-customer-*）");
    } else if (name.startsWith("x-amz-server-side-encryption-")) throw notImplemented(`KMS 服务端加密（${name}）`);
    else if (name.startsWith("x-amz-object-lock-")) throw notImplemented(`对象锁定（保留期限与法律保留，${name}）`);
    else if (name === "x-amz-storage-class") checkStorageClass(value);
  }
}

/** AWS's limit on user-defined metadata: the UTF-8 bytes of every name (without `x-amz-meta-`) and value together. */
export const MAX_USER_METADATA_BYTES = 2048;

const PREFIX = "x-amz-meta-";

/**
 * Bytes of a header value as sent. Bun hands header values over byte for byte as Latin-1 characters
 * (UTF-8 `中` arrives as three characters), so their length is the wire size; a form field is real
 * text, counted in UTF-8.
 */
const wireBytes = (text: string): number => (/[^\u0000-\u00ff]/.test(text) ? Buffer.byteLength(text, "utf8") : text.length);

/** Total size of the x-amz-meta-* entries of `meta`, as AWS counts it. */
export function userMetadataBytes(meta: Record<string, string>): number {
  let total = 0;
  for (const [name, value] of Object.entries(meta)) if (name.startsWith(PREFIX)) total += wireBytes(name.slice(PREFIX.length)) + wireBytes(value);
  return total;
}

/** Over 2 KB of user metadata is AWS's 400 MetadataTooLarge (with its Size and MaxSizeAllowed); nothing is written. */
export function requireMetadataSize(meta: Record<string, string>): void {
  const size = userMetadataBytes(meta);
  if (size <= MAX_USER_METADATA_BYTES) return;
  throw new S3Error(
    "MetadataTooLarge",
    `自定义元数据（x-amz-meta-*）共 ${size} 字节，超过上限 ${MAX_USER_METADATA_BYTES} 字节（名称不含 x-amz-meta- 前缀与值的 UTF-8 字节数之和）`,
    400,
    {},
    { Size: size, MaxSizeAllowed: MAX_USER_METADATA_BYTES },
  );
}
