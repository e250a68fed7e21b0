import { PutObjectCommand } from "@aws-sdk/client-s3";
import { expect, test } from "bun:test";
import { form, makeJpeg } from "../helpers/images";
import { sdkClient, startS3Fixture } from "./s3-setup";

test("the per-user upload rate is shared by the console, the token data plane and /s3/", async () => {
  const { server, admin, cred } = await startS3Fixture({ upload_rate_per_min: 2 });
  try {
    await admin.json("POST", "/api/admin/upload", form(await makeJpeg(8, 8, 1), "a.jpg"));
    await admin.json("POST", "/api/admin/upload", form(await makeJpeg(8, 8, 2), "b.jpg"));
    const client = sdkClient(cred);
    let status: number | undefined;
    let name = "";
    try {
      await client.send(new PutObjectCommand({ Bucket: "kura", Key: "c.jpg", Body: await makeJpeg(8, 8, 3), ContentType: "image/jpeg" }));
    } catch (err) {
      const e = err as { name: string; $metadata?: { httpStatusCode?: number } };
      name = e.name;
      status = e.$metadata?.httpStatusCode;
    }
    expect([name, status]).toEqual(["SlowDown", 503]);
  } finally {
    await server.dispose();
  }
});
