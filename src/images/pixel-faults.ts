/**
 * Telling a server fault from a bad image when libvips fails. libvips words a file it could not
 * open for want of descriptors as the file's own fault ("Input file contains unsupported image
 * format"), so an upload arriving while the process is out of them was refused as a damaged image
 * (a 400/415 the client will not retry) instead of the retryable 503 every other surface gives.
 */
import { open } from "node:fs/promises";
import { isOutOfFileDescriptors } from "../errors";
import { serverFaultOf } from "../ops/server-faults";

/**
 * The server's own trouble behind a failed pixel operation, or undefined when the image is to
 * blame: a fault of the server-fault table named by the error itself (a full disk, missing
 * descriptors), or else descriptors found missing now (libvips hides them), by opening
 * /dev/null as libvips would open a file.
 */
export async function serverFaultBehind(err: unknown): Promise<unknown> {
  if (serverFaultOf(err)) return err;
  try {
    await (await open("/dev/null", "r")).close();
    return undefined;
  } catch (probe) {
    return isOutOfFileDescriptors(probe) ? probe : undefined;
  }
}
