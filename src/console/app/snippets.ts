// Ready-made client configurations for a freshly issued token (same shapes as the README).

export interface ClientSnippets {
  picgo: string;
  sharex: string;
  curl: string;
}

export function clientSnippets(origin: string, token: string): ClientSnippets {
  const endpoint = `${origin.replace(/\/+$/, "")}/api/upload`;
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
  return {
    picgo: JSON.stringify(picgo, null, 2),
    sharex: JSON.stringify(sharex, null, 2),
    curl: `curl -H "Authorization: Bearer ${token}" -F file=@photo.jpg ${endpoint}`,
  };
}
