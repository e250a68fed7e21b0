import type { AppContext } from "../context";
import type { ByteRange, GetResult } from "../channels/driver";
import type { BlobRow } from "./repo";

export class NoReadableChannelError extends Error {
  constructor() {
    super("没有可读取该图片的健康存储渠道");
  }
}

/** Channels holding a completed replica: healthy ones first, each group by priority. */
export function readCandidates(app: AppContext, blobId: number) {
  const done = new Set(app.images.doneChannelIds(blobId));
  const holders = app.channels.list().filter((c) => c.driver && done.has(c.row.id));
  return [...holders.filter((c) => c.healthy), ...holders.filter((c) => !c.healthy)];
}

/** Opens the blob's bytes from the best channel, failing over to the next on any error. */
export async function openBlob(app: AppContext, blob: Pick<BlobRow, "id" | "storage_key">, range?: ByteRange): Promise<GetResult & { channelId: number }> {
  for (const channel of readCandidates(app, blob.id)) {
    try {
      const result = await channel.driver!.get(blob.storage_key, range);
      return { ...result, channelId: channel.row.id };
    } catch (err) {
      app.log.warn("从存储渠道读取失败，切换到下一个", { channel: channel.row.name, blob: blob.id, err: (err as Error).message });
    }
  }
  throw new NoReadableChannelError();
}
