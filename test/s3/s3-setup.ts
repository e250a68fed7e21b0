/** A real Kura with an upload token and its S3 credential, for the /s3/ client tests. */
import { S3Client } from "@aws-sdk/client-s3";
import { adminSession, type Session } from "../helpers/client";
import { KuraServer } from "../helpers/server";

export interface S3Credential {
  access_key_id: string;
  secret_access_key: string;
  endpoint: string;
  region: string;
  bucket: string;
  url_prefix: string;
}

export interface S3Fixture {
  server: KuraServer;
  admin: Session;
  tokenId: number;
  cred: S3Credential;
}

export async function startS3Fixture(config: Record<string, unknown> = {}): Promise<S3Fixture> {
  const server = await KuraServer.start();
  const admin = await adminSession(server);
  if (Object.keys(config).length) await admin.json("PUT", "/api/admin/config", config);
  const token = await admin.json("POST", "/api/admin/tokens", { name: `s3-${Date.now()}` }, 201);
  const cred = await admin.json<S3Credential>("POST", `/api/admin/tokens/${token.id}/s3-credential`);
  return { server, admin, tokenId: token.id, cred };
}

export function sdkClient(cred: S3Credential, overrides: { secret?: string; accessKeyId?: string } = {}): S3Client {
  return new S3Client({
    endpoint: cred.endpoint,
    region: cred.region,
    forcePathStyle: true,
    credentials: { accessKeyId: overrides.accessKeyId ?? cred.access_key_id, secretAccessKey: overrides.secret ?? cred.secret_access_key },
    maxAttempts: 1,
  });
}
