/**
 * Purge-deleting an S3 channel whose peer lists badly (channel audit M1, M2), black box: a real
 * Kura, channels created through the admin API on a fake S3 peer (`channels/fakes/s3.ts`).
 * A listing that is not a ListBucketResult, or that repeats its continuation token, must end in
 * `drain_failed` with the channel kept and its objects untouched, not in a removed channel (M2)
 * or a listing loop at thousands of requests a second (M1); once the peer lists soundly the
 * retried drain finishes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { FakeS3, listResponse } from "../channels/fakes/s3";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { queryDb, waitFor, waitReplicaState } from "./channels.helpers";

const peer = new FakeS3();
afterAll(() => peer.stop());

describe("purge delete of an S3 channel whose listing is broken", () => {
  const { server, admin } = useAdmin();
  const channels = async () => (await admin.json("GET", "/api/admin/channels")).items as { id: number; name: string; deleting: boolean }[];
  const drainAlert = (name: string) =>
    queryDb<{ message: string; resolved_at: string }>(server, "SELECT message, resolved_at FROM alerts WHERE kind = 'drain_failed' AND target = ?", name);

  async function s3Channel(name: string, bucket: string): Promise<number> {
    const config = { provider: "Other", endpoint: peer.endpoint, region: "us-east-1", access_key_id: "AK", secret_access_key: "SK", path: `${bucket}/pre` };
    return (await admin.json("POST", "/api/admin/channels", { name, driver: "s3", config, priority: 10 }, 201)).id;
  }

  test("HTML and a repeated token: drain_failed, channel kept, objects kept, few requests; then the drain finishes", async () => {
    const image = (await admin.json("POST", "/api/admin/upload", form(await makeJpeg(30, 20, 77), "a.jpg"))).id;
    const html = await s3Channel("s3html", "html");
    const loop = await s3Channel("s3loop", "loop");
    await waitReplicaState(admin, image, html, "done");
    await waitReplicaState(admin, image, loop, "done");
    const stored = { html: peer.keys("html"), loop: peer.keys("loop") };
    expect(stored.html).toHaveLength(1);
    expect(stored.loop).toEqual(stored.html);

    peer.onList = (req) => {
      if (req.bucket === "html") return new Response("<html><body>Service temporarily unavailable</body></html>", { headers: { "content-type": "text/html" } });
      if (req.bucket === "loop") {
        const key = `${req.query.get("prefix") ?? ""}loopobj`;
        return listResponse([{ key, size: 1 }], true, "<NextContinuationToken>same</NextContinuationToken>");
      }
      return undefined;
    };
    const listsBefore = peer.lists("loop").length;
    await admin.json("DELETE", `/api/admin/channels/${html}?purge=true`, undefined, 202);
    await admin.json("DELETE", `/api/admin/channels/${loop}?purge=true`, undefined, 202);
    await server.waitForLog(/msg=告警已触发 kind=drain_failed target=s3html/, 20_000);
    await server.waitForLog(/msg=告警已触发 kind=drain_failed target=s3loop/, 20_000);
    expect(drainAlert("s3html")).toEqual([
      { message: "存储渠道 s3html 清空失败：列出对象失败：S3 列表响应格式无效：不是 ListBucketResult 文档", resolved_at: "" },
    ]);
    expect(drainAlert("s3loop")).toEqual([
      { message: "存储渠道 s3loop 清空失败：列出对象失败：S3 列表响应格式无效：分页没有进展（重复的续传标记）", resolved_at: "" },
    ]);
    // Kept, still draining, with the image's object where it was.
    expect(
      (await channels())
        .filter((c) => c.deleting)
        .map((c) => c.name)
        .sort(),
    ).toEqual(["s3html", "s3loop"]);
    expect(peer.keys("html")).toEqual(stored.html);
    expect(peer.keys("loop")).toEqual(stored.loop);
    // The looping listing stopped after its repeat and waits for the job's backoff: a second later
    // only a handful of requests were made (the unguarded loop made ~3,700 a second).
    await Bun.sleep(1000);
    expect(peer.lists("loop").length - listsBefore).toBeLessThan(10);

    peer.onList = undefined;
    await waitFor(channels, (list) => list.every((c) => c.name === "local"), 60_000, "both drains to finish");
    expect(peer.keys("html")).toEqual([]);
    expect(peer.keys("loop")).toEqual([]);
    expect(drainAlert("s3html")[0]!.resolved_at).not.toBe("");
    expect(drainAlert("s3loop")[0]!.resolved_at).not.toBe("");
  }, 90_000);
});
