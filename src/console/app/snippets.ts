// Ready-made client configurations for a freshly issued token (same shapes as the README).

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
