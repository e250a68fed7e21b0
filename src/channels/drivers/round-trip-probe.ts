import { randomBytes } from "node:crypto";
import { readBoundedBytes } from "../../shared/bounded-read";
import type { Driver } from "../driver";

/**
 * The deep probe: write a random object under `_kura/probe/`, read it back and
 * compare, then delete it whatever happened. A mismatch is reported as an
 * `ErrorType` naming `label` (e.g. "S3").
 */
export async function roundTripProbe(driver: Driver, label: string, ErrorType: new (message: string) => Error = Error): Promise<void> {
  const key = `_kura/probe/${randomBytes(8).toString("hex")}`;
  const payload = new Uint8Array(randomBytes(64));
  try {
    await driver.put(key, payload, payload.byteLength);
    const got = await driver.get(key);
    // No more than was written: a peer answering an endless body must not fill memory.
    const back = await readBoundedBytes(got.stream, payload.byteLength, () => new ErrorType(`${label} 读写检查失败: 读回的数据比写入的更长`));
    if (Buffer.compare(back, payload) !== 0) throw new ErrorType(`${label} 读写检查失败: 读回的数据与写入不一致`);
  } finally {
    await driver.delete(key).catch(() => {});
  }
}
