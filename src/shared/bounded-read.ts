/**
 * Reading a peer's answer into memory without letting the peer choose how much memory that takes.
 * A storage peer, an OAuth endpoint or a proxy in front of them may answer anything; a list page,
 * a PROPFIND answer, token JSON or an error body is small when the peer is sound, so past a bound
 * the read stops, the rest is cancelled (closing the socket) and the caller fails in its own words.
 */

/** Bytes of `body`, at most `maxBytes`; more than that cancels the body and throws `tooLarge()`. */
export async function readBoundedBytes(body: ReadableStream<Uint8Array> | null, maxBytes: number, tooLarge: () => Error): Promise<Buffer> {
  const { bytes, complete } = await readPrefix(body, maxBytes + 1);
  if (!complete || bytes.length > maxBytes) throw tooLarge();
  return bytes;
}

/** The body as UTF-8 text, at most `maxBytes` (see readBoundedBytes). */
export async function readBoundedText(response: Response, maxBytes: number, tooLarge: () => Error): Promise<string> {
  return (await readBoundedBytes(response.body, maxBytes, tooLarge)).toString("utf8");
}

/**
 * The first `maxBytes` of the body as text, the rest cancelled unread: for error answers, where
 * only a code near the start is wanted and a longer body is no reason for another error.
 */
export async function readTextPrefix(response: Response, maxBytes: number): Promise<string> {
  // A body that breaks off still yields what arrived before (an S3 <Code> near the start).
  return (await readPrefix(response.body, maxBytes, true)).bytes.toString("utf8");
}

/**
 * Up to `limit` bytes; `complete` when the body ended within them (the rest is cancelled
 * otherwise). A failing read throws, or with `keepOnError` ends the prefix where it broke off.
 */
async function readPrefix(body: ReadableStream<Uint8Array> | null, limit: number, keepOnError = false): Promise<{ bytes: Buffer; complete: boolean }> {
  if (!body) return { bytes: Buffer.alloc(0), complete: true };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const next = await reader.read().catch((err: unknown) => {
        if (keepOnError) return undefined;
        throw err;
      });
      if (next === undefined) return { bytes: Buffer.concat(chunks, size), complete: false };
      const { done, value } = next;
      if (done) return { bytes: Buffer.concat(chunks, size), complete: true };
      const room = limit - size;
      chunks.push(value.length > room ? value.subarray(0, room) : value);
      size += Math.min(value.length, room);
      if (size >= limit) {
        await reader.cancel().catch(() => {});
        return { bytes: Buffer.concat(chunks, size), complete: false };
      }
    }
  } finally {
    reader.releaseLock();
  }
}
