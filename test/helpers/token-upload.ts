import { beforeAll, expect } from "bun:test";
import type { Session } from "./client";
import { form } from "./images";
import type { KuraServer } from "./server";

/** The image detail (`GET /api/admin/images/:id`) fields the delivery tests read. */
export interface UploadedImage {
  id: string;
  sha256: string;
  size: number;
  mime: string;
  width: number;
  height: number;
}

/**
 * Uploads through the data plane (`POST /api/upload` with an upload token, the way PicGo and
 * ShareX do, so the default `exif_policy` applies) and returns the stored image as the admin sees
 * it. The token is created in a beforeAll registered by this call.
 */
export function useTokenUpload(server: KuraServer, admin: Session): (bytes: Uint8Array, name: string) => Promise<UploadedImage> {
  let token = "";
  beforeAll(async () => {
    token = (await admin.json("POST", "/api/admin/tokens", { name: "uploads" }, 201)).token;
  });
  return async (bytes, name) => {
    const res = await fetch(server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form(bytes, name) });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    return admin.json("GET", `/api/admin/images/${id}`);
  };
}
