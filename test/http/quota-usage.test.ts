/**
 * Quota counts what a user already stores: uploads that each fit alone but cross the quota together
 * are refused once the quota is reached — over the console, the token API and S3 alike — also when
 * they arrive at the same time.
 */
import { describe, expect, test } from "bun:test";
import sharp from "sharp";
import { Session } from "../helpers/client";
import { listFiles } from "../helpers/files";
import { useAdmin } from "../helpers/fixture";
import { form } from "../helpers/images";
import type { S3Credential } from "../s3/s3-setup";
import { signedS3 } from "../s3/signed-request";
import { queryDb } from "./channels.helpers";

/** A PNG of seeded noise: nearly incompressible, so sizes of same-sized images differ by little. */
function noisePng(seed: number): Promise<Buffer> {
  const raw = new Uint8Array(48 * 48 * 3);
  let x = seed * 2654435761;
  for (let i = 0; i < raw.length; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    raw[i] = x & 0xff;
  }
  return sharp(raw, { raw: { width: 48, height: 48, channels: 3 } })
    .png()
    .toBuffer();
}

type Surface = "console" | "token" | "s3";

describe("quota with existing usage", () => {
  const { server, admin } = useAdmin();

  /** A fresh user with `quota` bytes and an uploader for one surface. */
  async function uploaderFor(surface: Surface, quota: number) {
    const name = `quota-${surface}`;
    const user = await admin.json("POST", "/api/admin/users", { name, password: "password-1", quota_bytes: quota }, 201);
    const s = new Session(server);
    expect((await s.login(name, "password-1")).status).toBe(200);
    const token = await s.json("POST", "/api/admin/tokens", { name: "uploader" }, 201);
    const cred = surface === "s3" ? await s.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`) : undefined;
    const upload = async (bytes: Buffer, i: number): Promise<{ status: number; text: string }> => {
      let res: Response;
      if (surface === "console") res = await s.request("POST", "/api/admin/upload", form(bytes, `c${i}.png`, { exif_policy: "passthrough" }));
      else if (surface === "token")
        res = await fetch(server.url("/api/upload"), {
          method: "POST",
          headers: { authorization: `Bearer ${token.token}` },
          body: form(bytes, `t${i}.png`, { exif_policy: "passthrough" }),
        });
      else res = await signedS3(server.base, cred!, "PUT", `/s3/kura/s${i}.png`, { body: bytes });
      return { status: res.status, text: await res.text() };
    };
    return { userId: user.id as string, upload };
  }

  const usage = (userId: string) =>
    queryDb<{ n: number; bytes: number }>(
      server,
      "SELECT COUNT(*) AS n, COALESCE(SUM(b.size), 0) AS bytes FROM images i JOIN blobs b ON b.id = i.blob_id WHERE i.user_id = ?",
      userId,
    )[0]!;

  for (const [index, surface] of (["console", "token", "s3"] as const).entries()) {
    test(`${surface}: after one stored image only one of three simultaneous uploads fits, each of which would fit alone`, async () => {
      const images = await Promise.all([0, 1, 2, 3].map((i) => noisePng(100 * (index + 1) + i)));
      const largest = Math.max(...images.map((b) => b.length));
      const smallest = Math.min(...images.map((b) => b.length));
      expect(2 * smallest).toBeGreaterThan(1.5 * largest); // any two of the burst cross the quota together
      const quota = images[0]!.length + Math.floor(1.5 * largest);
      const { userId, upload } = await uploaderFor(surface, quota);

      expect((await upload(images[0]!, 0)).status).toBe(200);
      expect(usage(userId)).toEqual({ n: 1, bytes: images[0]!.length });

      const answers = await Promise.all(images.slice(1).map((bytes, i) => upload(bytes, i + 1)));
      const accepted = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 403);
      expect(accepted.length).toBe(1);
      expect(refused.length).toBe(2);
      for (const r of refused) expect(r.text).toContain("存储配额已满");
      if (surface === "s3") for (const r of refused) expect(r.text).toContain("<Code>AccessDenied</Code>");

      const after = usage(userId);
      expect(after.n).toBe(2);
      expect(after.bytes).toBeLessThanOrEqual(quota);
      // Nothing written for the refused uploads stays on the channel.
      const keys = queryDb<{ storage_key: string }>(server, "SELECT storage_key FROM blobs");
      const files = listFiles(`${server.dataDir}/storage`).filter((p) => p.startsWith("img/"));
      expect(files.sort()).toEqual(keys.map((k) => k.storage_key).sort());
    });
  }
});
