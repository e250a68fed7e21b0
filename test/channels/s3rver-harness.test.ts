/**
 * The s3rver test peer behaves like S3 where Kura's tests depend on it: puts and deletes under one
 * prefix at the same time all succeed (s3rver itself removed emptied parent directories on delete,
 * so a put racing it failed with a 500).
 */
import aws4 from "aws4";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningS3, startS3, TEST_CREDENTIALS } from "./s3rver-harness";

let s3: RunningS3;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kura-s3rver-"));
  s3 = await startS3({ directory: join(dir, "s3"), buckets: ["b"] });
});
afterAll(async () => {
  await s3.stop();
  rmSync(dir, { recursive: true, force: true });
});

function signed(method: string, key: string, body?: Uint8Array): Promise<Response> {
  const { host } = new URL(s3.endpoint);
  const path = `/b/${key}`;
  const req = aws4.sign(
    { host, path, method, service: "s3", region: "us-east-1", headers: { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" }, body: body ? Buffer.from(body) : "" },
    TEST_CREDENTIALS,
  );
  return fetch(`${s3.endpoint}${path}`, { method, headers: req.headers as Record<string, string>, body: body as BodyInit | undefined });
}

test("puts racing deletes under one prefix all succeed", async () => {
  const body = new Uint8Array(4096).fill(7);
  const statuses: number[] = [];
  for (let i = 0; i < 60; i++) {
    // The only object under p/ is deleted while the next one is written there.
    const [put, del] = await Promise.all([
      signed("PUT", `p/${i}`, body),
      i ? signed("DELETE", `p/${i - 1}`) : Promise.resolve(new Response(null, { status: 204 })),
    ]);
    statuses.push(put.status, del.status);
  }
  expect(statuses.filter((s) => s >= 300)).toEqual([]);
});
