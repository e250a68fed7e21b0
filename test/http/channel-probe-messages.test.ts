/**
 * A channel probe that fails says why in Chinese, also where the runtime refuses before any
 * connection: an S3 endpoint on an IP address with virtual-hosted style would put the bucket in
 * front of the IP (`bucket.127.0.0.1`), which Bun's fetch refuses as ERR_INVALID_URL.
 */
import { describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { expectUserMessage } from "../helpers/messages";

const { admin } = useAdmin();

describe("S3 on an IP address without path style", () => {
  const closedPort = async () => {
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = probe.port;
    probe.stop(true);
    return port;
  };

  test.each([
    [
      "template minio",
      (endpoint: string) => ({
        template: "minio",
        inputs: { endpoint, access_key_id: "a", secret_access_key: "b", path: "bucket/p", force_path_style: "false" },
      }),
    ],
    [
      "custom s3",
      (endpoint: string) => ({
        driver: "s3",
        config: { provider: "Other", endpoint, access_key_id: "a", secret_access_key: "b", path: "bucket/p", force_path_style: "false" },
      }),
    ],
  ])("%s: the test says to turn path style on, not ERR_INVALID_URL", async (_, body) => {
    for (const endpoint of [`http://127.0.0.1:${await closedPort()}`, "http://localhost:9000", "http://[::1]:9000"]) {
      const result = await admin.json("POST", "/api/admin/channels/test", { name: "ip-s3", ...body(endpoint) });
      expect(result.ok).toBe(false);
      expectUserMessage(result.error);
      expect(result.error).toContain("force_path_style");
      const created = await admin.request("POST", "/api/admin/channels", { name: "ip-s3", ...body(endpoint) });
      expect(created.status).toBe(400);
      const { error } = await created.json();
      expectUserMessage(error);
      expect(error).toContain("force_path_style");
    }
  });
});
