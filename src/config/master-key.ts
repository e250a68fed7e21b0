import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createFileDurably } from "../shared/durable-file";

/**
 * The master key encrypts channel credentials and secret settings, and derives
 * per-purpose secrets (CSRF tokens, S3 secrets, crypt passwords). The database
 * stores only its fingerprint, so a wrong key is detected before anything is written.
 */
export class MasterKey {
  private constructor(private readonly key: Buffer) {}

  static parse(text: string): MasterKey {
    const t = text.trim();
    if (!/^[0-9a-fA-F]{64}$/.test(t)) throw new Error("主密钥格式无效（需要 64 位十六进制）");
    return new MasterKey(Buffer.from(t, "hex"));
  }

  static generate(): { key: MasterKey; text: string } {
    const text = randomBytes(32).toString("hex");
    return { key: MasterKey.parse(text), text };
  }

  get fingerprint(): string {
    return createHash("sha256").update("kura-master-key-fingerprint\0").update(this.key).digest("hex").slice(0, 32);
  }

  /** A stable secret for one purpose, e.g. derive("csrf") or derive("s3-secret", tokenId). */
  derive(...parts: (string | number)[]): Buffer {
    const h = createHmac("sha256", this.key);
    h.update(parts.map(String).join("\0"));
    return h.digest();
  }

  /** AES-256-GCM; output "v1:<iv>:<tag>:<ciphertext>" in base64url. */
  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.derive("at-rest"), iv);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return ["v1", iv, cipher.getAuthTag(), body].map((p) => (typeof p === "string" ? p : p.toString("base64url"))).join(":");
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, body] = sealed.split(":");
    if (version !== "v1" || !iv || !tag || body === undefined) throw new SealedDataError("格式无效");
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.derive("at-rest"), Buffer.from(iv, "base64url"));
      decipher.setAuthTag(Buffer.from(tag, "base64url"));
      return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8");
    } catch {
      // node:crypto says "Unsupported state or unable to authenticate data" or "Invalid authentication tag length".
      throw new SealedDataError("无法用当前主密钥解密（数据已损坏，或不是用这个主密钥加密的）");
    }
  }
}

/**
 * A sealed value that cannot be opened. `reason` completes a sentence naming the value
 * ("存储渠道 nas 的加密配置" + reason); the message alone says it of the ciphertext.
 */
export class SealedDataError extends Error {
  constructor(readonly reason: string) {
    super(`密文${reason}`);
    this.name = "SealedDataError";
  }
}

export function masterKeyPath(dataDir: string): string {
  return join(dataDir, "master.key");
}

/** Reads the key from the environment or `<data_dir>/master.key`; undefined when neither exists. */
export function loadMasterKey(dataDir: string, envValue: string | undefined): MasterKey | undefined {
  if (envValue) return MasterKey.parse(envValue);
  const file = masterKeyPath(dataDir);
  if (!existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EISDIR") throw new Error(`主密钥文件 ${file} 是一个目录，不是文件`);
    if (code === "EACCES" || code === "EPERM") throw new Error(`无法读取主密钥文件 ${file}：没有权限（它须属于运行 Kura 的用户，权限 0600）`);
    throw new Error(`无法读取主密钥文件 ${file}：${(err as Error).message}`);
  }
  return MasterKey.parse(text);
}

export function writeNewMasterKeyFile(dataDir: string): MasterKey {
  const { key, text } = MasterKey.generate();
  const file = masterKeyPath(dataDir);
  // Synced before the database records the key's fingerprint: a crash must not leave an empty
  // key file beside a database whose credentials only that key opens.
  createFileDurably(file, `${text}\n`, 0o600);
  return key;
}
