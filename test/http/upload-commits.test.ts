// Upload writes go through the group commit (src/db/group-commit.ts) and the WAL is checkpointed
// by a worker, not by the commits on the loop (src/db/checkpointer.ts). Seen from outside: a burst
// of simultaneous uploads all land, each readable at once, with two write units each (the write
// intent and the reference) in at most as many commits, and the checkpoints show up in /metrics.
import { describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, makePng } from "../helpers/images";
import { metricValue } from "../helpers/metrics";

const UNITS = "kura_db_group_commit_units_total";
const COMMITS = "kura_db_group_commits_total";
const COPIES = 'kura_db_wal_checkpoints_total{kind="copy"}';
const SEARCH_BACKLOG = "kura_search_backlog_images";

describe("upload commits", () => {
  const { server, admin } = useAdmin();

  test("a burst of simultaneous uploads shares commits and every image is there right after its answer", async () => {
    await admin.json("PUT", "/api/admin/config", { upload_rate_per_min: 10_000 });
    const units0 = await metricValue(server.url(""), UNITS);
    const commits0 = await metricValue(server.url(""), COMMITS);
    const images = await Promise.all(Array.from({ length: 12 }, (_, i) => makePng(40 + i, 30, 700 + i)));
    const ids = await Promise.all(
      images.map(async (png, i) => {
        const up = await admin.json("POST", "/api/admin/upload", form(png, `burst-${i}.png`, { exif_policy: "passthrough" }));
        // Committed before the answer: the image is served at once.
        const res = await fetch(server.url(`/i/${up.id}`));
        expect(res.status).toBe(200);
        expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(png))).toBe(true);
        return up.id as string;
      }),
    );
    expect(new Set(ids).size).toBe(12);
    const units = (await metricValue(server.url(""), UNITS)) - units0;
    const commits = (await metricValue(server.url(""), COMMITS)) - commits0;
    expect(units).toBe(24);
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(commits).toBeLessThanOrEqual(units);
    // Found by search at once (from the backlog), and still after the background indexer took them.
    const found = async () => ((await admin.json("GET", "/api/admin/images?search=burst-&page_size=50")).items as { id: string }[]).map((i) => i.id).sort();
    expect(await found()).toEqual([...ids].sort());
    const deadline = Date.now() + 5000;
    while ((await metricValue(server.url(""), SEARCH_BACKLOG)) > 0 && Date.now() < deadline) await Bun.sleep(50);
    expect(await metricValue(server.url(""), SEARCH_BACKLOG)).toBe(0);
    expect(await found()).toEqual([...ids].sort());
  });

  test("the WAL is checkpointed by the worker after writes", async () => {
    await admin.json("POST", "/api/admin/upload", form(await makePng(50, 50, 901), "checkpoint.png"));
    const deadline = Date.now() + 5000;
    let checkpoints = await metricValue(server.url(""), COPIES);
    while (checkpoints === 0 && Date.now() < deadline) {
      await Bun.sleep(50);
      checkpoints = await metricValue(server.url(""), COPIES);
    }
    expect(checkpoints).toBeGreaterThan(0);
    expect(server.logs).not.toContain("后台 WAL 检查点线程失败");
  });
});
