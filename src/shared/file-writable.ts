/**
 * A Node Writable to a new file through `fs/promises`, in place of `fs.createWriteStream`.
 *
 * Why: in Bun, the callback half of `node:fs` (createWriteStream's writes, `fs.fsync`) runs on the
 * libuv thread pool, which has one thread per core and which sharp's encodes hold for their whole
 * length. Two cold renders on a two-core server held it for a minute or more, and every upload
 * streaming to its staging file, and every write's durability fsync, waited for them (an 8 KB upload
 * took 98 s). `fs/promises` runs on Bun's own pool, which renders never occupy (durable-file.ts fsyncPath
 * syncs that way too).
 */
import { type FileHandle, open } from "node:fs/promises";
import { Writable } from "node:stream";
import { writeAll } from "./write-all";

export function fileWritable(path: string, mode: number): Writable {
  let handle: FileHandle | undefined;
  const closeHandle = async () => {
    const open = handle;
    handle = undefined;
    await open?.close();
  };
  return new Writable({
    construct(callback) {
      open(path, "w", mode).then((h) => {
        handle = h;
        callback();
      }, callback);
    },
    write(chunk: Buffer, _encoding, callback) {
      writeAll(handle!, chunk).then(() => callback(), callback);
    },
    final(callback) {
      closeHandle().then(() => callback(), callback);
    },
    destroy(err, callback) {
      closeHandle().then(
        () => callback(err),
        () => callback(err),
      );
    },
  });
}
