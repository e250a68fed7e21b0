import type { ObjectInfo } from "../../driver";
import { readListBody } from "./body";
import type { S3Client } from "./client";
import { ListPageError, parseListPage } from "./xml";

/**
 * Truncated pages in a row without a single key. AWS sends some (ListObjectsV2 over long runs of
 * delete markers); a peer that loops with fresh tokens sends them forever.
 */
const MAX_EMPTY_PAGES = 1000;

/**
 * ListObjectsV2 paging. Some older S3 clones ignore `list-type=2`, answer in V1 form and never
 * send a continuation token; for them we continue with V1's `marker` (the last key seen) instead
 * of looping or stopping early.
 *
 * A peer that makes no progress (hands back a token or marker already used, or repeats the same
 * page under a new token) fails the listing: a drain would otherwise list forever at thousands of
 * requests a second instead of backing off with its `drain_failed` alert open.
 */
export async function* listObjects(client: S3Client, fullPrefix: string, pageSize: number, timeoutMs: number): AsyncGenerator<ObjectInfo> {
  let token: string | undefined;
  let marker: string | undefined;
  // Hashes, not the strings: a peer chooses how long its tokens are.
  const used = new Set<bigint | number>();
  let emptyPages = 0;
  let previous = "";
  for (;;) {
    const query: Record<string, string> = marker === undefined ? { "list-type": "2", "encoding-type": "url" } : { marker, "encoding-type": "url" };
    query["max-keys"] = String(pageSize);
    query.prefix = fullPrefix;
    if (token) query["continuation-token"] = token;
    const response = await client.send({ method: "GET", query, timeoutMs });
    const page = parseListPage(await readListBody(response, client.origin));
    yield* page.objects;
    if (!page.truncated || pageSize === 1) return;

    const first = page.objects[0]?.key;
    const last = page.objects.at(-1)?.key;
    if (page.nextToken && marker === undefined) token = page.nextToken;
    else if (last !== undefined) marker = last;
    else throw new ListPageError("分页信息缺失");
    const next = Bun.hash(marker === undefined ? `t${token}` : `m${marker}`);
    if (used.has(next)) throw new ListPageError("分页没有进展（重复的续传标记）");
    used.add(next);
    if (first === undefined) {
      if (++emptyPages > MAX_EMPTY_PAGES) throw new ListPageError(`连续 ${MAX_EMPTY_PAGES} 页没有对象，分页没有进展`);
    } else {
      emptyPages = 0;
      const span = `${page.objects.length}\n${first}\n${last}`;
      if (span === previous) throw new ListPageError("分页没有进展（重复返回同一页）");
      previous = span;
    }
  }
}
