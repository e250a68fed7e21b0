/**
 * The fault tier's S3 peer: a real S3 server (s3rver) with one bucket, reached by Kura only
 * through a FaultProxy, so a test can hold, stall or black-hole its traffic.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startS3, TEST_CREDENTIALS, type RunningS3 } from "../channels/s3rver-harness";
import type { Session } from "../helpers/client";
import { FaultProxy } from "./harness";

export interface ProxiedS3 {
  s3: RunningS3;
  proxy: FaultProxy;
  bucket: string;
  stop(): Promise<void>;
}

export async function startProxiedS3(label: string, bucket: string): Promise<ProxiedS3> {
  const scratch = mkdtempSync(join(tmpdir(), `kura-fault-${label}-`));
  const s3 = await startS3({ directory: join(scratch, "s3"), buckets: [bucket] });
  const proxy = await FaultProxy.start(s3.port);
  return {
    s3,
    proxy,
    bucket,
    async stop() {
      await proxy.stop();
      await s3.stop().catch(() => {});
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}

/** Adds an S3 channel whose endpoint is the proxy; returns its id. */
export async function addProxiedChannel(admin: Session, peer: ProxiedS3, name: string, priority: number): Promise<number> {
  const channel = await admin.json(
    "POST",
    "/api/admin/channels",
    {
      name,
      driver: "s3",
      priority,
      config: {
        provider: "Minio",
        endpoint: peer.proxy.url,
        access_key_id: TEST_CREDENTIALS.accessKeyId,
        secret_access_key: TEST_CREDENTIALS.secretAccessKey,
        path: peer.bucket,
      },
    },
    201,
  );
  return channel.id;
}

/** The id of the default local channel. */
export async function localChannelId(admin: Session): Promise<number> {
  return (await admin.json("GET", "/api/admin/channels")).items.find((c: { name: string }) => c.name === "local").id;
}

/** How long `work` took, with its value. */
export async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}
