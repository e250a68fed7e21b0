/**
 * Every job kind Kura runs and the payload it carries. The queue is typed with this map,
 * so a handler and the code that enqueues its work cannot disagree on the payload shape.
 * Payloads are stored as JSON: plain data only.
 */
export interface JobKinds {
  /** Copy one blob to one more channel. */
  "blob.replicate": { blob_id: number; channel_id: number };
  /** Perceptual hash of a new blob, for the similar-image scan. */
  "blob.phash": { blob_id: number };
  /** Physical delete of a blob once its grace period is over. */
  "blob.delete": { blob_id: number };
  /** Move a deleted channel's sole copies elsewhere, then purge it. */
  "channel.drain": { channel_id: number };
  /** Copy existing blobs to a newly added channel. */
  /** `expedite`: run replication jobs now that wait out a back-off (the channel, or a source, is healthy again). */
  "channel.backfill": { channel_id: number; expedite?: boolean };
  /** One batch of CDN cache purges. */
  "cdn.purge": { files: string[] };
}

export type JobKind = keyof JobKinds;
