import type { ObjectInfo } from "../../driver";
import { readListBody } from "./body";
import type { S3Client } from "./client";
import { ListPageError, parseListPage } from "./xml";
import { PageGuard } from "../page-guard";

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
  const guard = new PageGuard((why) => new ListPageError(why));
  let previous = "";
  for (;;) {
    const query: Record<string, string> = marker === undefined ? { "list-type": "2", "encoding-type": "url" } : { marker, "encoding-type": "url" };
    query["max-keys"] = String(pageSize);
    query.prefix = fullPrefix;
    if (token) query["continuation-token"] = token;
    const response = await client.send({ method: "GET", query, timeoutMs });
    const page = parseListPage(await readListBody(response));
    yield* page.objects;
    if (!page.truncated || pageSize === 1) return;

    const first = page.objects[0]?.key;
    const last = page.objects.at(-1)?.key;
    if (page.nextToken && marker === undefined) token = page.nextToken;
    else if (last !== undefined) marker = last;
    else throw new ListPageError("分页信息缺失");
    guard.follow(marker === undefined ? `t${token}` : `m${marker}`, page.objects.length);
    // The same page again under a fresh token: a peer that ignores the token.
    if (first !== undefined) {
      const span = `${page.objects.length}\n${first}\n${last}`;
      if (span === previous) throw new ListPageError("分页没有进展（重复返回同一页）");
      previous = span;
    }
  }
}
