// Ready-made client configurations for a freshly issued token (same shapes as the README).
import type { S3Credential } from "./types";

export interface ClientSnippets {
  picgo: string;
  sharex: string;
  curl: string;
  /** PicGo with picgo-plugin-lankong (Lsky Pro V2 API); PicList's built-in Lsky uploader takes the same values. */
  lankong: string;
  /** ShareX's built-in Chevereto uploader (Chevereto API v1). */
  chevereto: string;
}

export function clientSnippets(origin: string, token: string): ClientSnippets {
  const root = origin.replace(/\/+$/, "");
  const endpoint = `${root}/api/upload`;
  const picgo = {
    picBed: {
      current: "web-uploader",
      uploader: "web-uploader",
      "web-uploader": {
        url: endpoint,
        paramName: "file",
        jsonPath: "url",
        // The plugin takes headers and body as JSON *strings*.
        customHeader: JSON.stringify({ Authorization: `Bearer ${token}` }),
        customBody: JSON.stringify({ exif_policy: "strip" }),
      },
    },
    picgoPlugins: { "picgo-plugin-web-uploader": true },
  };
  const sharex = {
    Version: "16.0.0",
    Name: "Kura",
    DestinationType: "ImageUploader",
    RequestMethod: "POST",
    RequestURL: endpoint,
    Headers: { Authorization: `Bearer ${token}` },
    Body: "MultipartFormData",
    FileFormName: "file",
    URL: "{json:url}",
    ErrorMessage: "{json:error}",
  };
  const lankong = {
    picBed: {
      current: "lankong",
      uploader: "lankong",
      // The plugin sends "token" verbatim as the Authorization header; the server root has no trailing slash.
      lankong: { lskyProVersion: "V2", server: root, token: `Bearer ${token}`, permission: 1, ignoreCertErr: false, syncDelete: true },
    },
    picgoPlugins: { "picgo-plugin-lankong": true },
  };
  return {
    picgo: JSON.stringify(picgo, null, 2),
    lankong: JSON.stringify(lankong, null, 2),
    chevereto: `上传地址（Upload URL）：${root}/api/1/upload\nAPI key：${token}`,
    sharex: JSON.stringify(sharex, null, 2),
    curl: `curl -H "Authorization: Bearer ${token}" -F file=@photo.jpg ${endpoint}`,
  };
}

/**
 * picgo-plugin-s3's `outputURLPattern` for the `/o/` alias of the uploaded key. `{path}` is the
 * path of the request the AWS SDK sent, percent-encoded (`s3/kura/<key>` for the endpoint
 * `…/s3`); the regex drops the endpoint's path and the bucket, leaving the encoded key. The
 * plugin's deprecated `urlPrefix` appends the raw key instead, which breaks on `#`, `?` and `%`.
 * Every character of those segments but letters, digits, `_` and `-` becomes `.` (any one
 * character), so the plugin's `{path:/…/i,''}` syntax holds no `/` and no regex syntax. The flag
 * is required: without one the plugin skips the replacement and the link keeps `s3/kura/`.
 */
export function picgoS3UrlPattern(cred: Pick<S3Credential, "endpoint" | "bucket" | "url_prefix">): string {
  const segments = [...new URL(cred.endpoint).pathname.split("/").filter(Boolean), cred.bucket];
  const skip = segments.map((s) => `${s.replace(/[^A-Za-z0-9_-]/g, ".")}.`).join("");
  return `${cred.url_prefix}{path:/^${skip}/i,''}`;
}

/** PicGo with picgo-plugin-s3 on the /s3/ endpoint (README "S3 uploads"): path style, links from outputURLPattern. */
export function picgoS3Snippet(cred: S3Credential): string {
  const s3 = {
    accessKeyID: cred.access_key_id,
    secretAccessKey: cred.secret_access_key,
    bucketName: cred.bucket,
    uploadPath: "{year}/{month}/{md5}.{extName}",
    region: cred.region,
    endpoint: cred.endpoint,
    // Kura's S3 surface takes the bucket in the path, never in the host name.
    pathStyleAccess: true,
    outputURLPattern: picgoS3UrlPattern(cred),
  };
  return JSON.stringify({ picBed: { current: "aws-s3", uploader: "aws-s3", "aws-s3": s3 }, picgoPlugins: { "picgo-plugin-s3": true } }, null, 2);
}
