// The forms of an image's public link (`/i/<id>.<ext>`, Markdown, HTML, BBCode, thumbnail).
// Shared by the browser console and the server (the Lsky Pro and Chevereto compatible answers,
// CDN purge, `/i/<id>.<ext>`), so every surface offers the same forms. The console bundles this
// file for the browser: keep it free of browser and server imports.

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/apng": "png",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/avif": "avif",
};

/** The file extension of a stored image type ("jpg" for JPEG), used in `/i/<id>.<ext>`. */
export function imageExtension(mime: string): string {
  return EXTENSIONS[mime] ?? "img";
}

/** `/i/<id>.<ext>`: the same image as `/i/<id>`, for forums that insist on an extension. */
export function extensionPath(id: string, mime: string): string {
  return `/i/${id}.${imageExtension(mime)}`;
}

/** The smallest allowed resize width (the thumbnail), or undefined when resizing is off. */
export function thumbnailWidth(widths: readonly number[] | null | undefined): number | undefined {
  return widths?.length ? Math.min(...widths) : undefined;
}

/** A resized form of a public image URL (`?w=`); the URL itself when resizing is off. */
export function resizedUrl(url: string, width: number | undefined): string {
  if (!width) return url;
  return `${url}${url.includes("?") ? "&" : "?"}w=${width}`;
}

export interface LinkSet {
  url: string;
  markdown: string;
  markdown_with_link: string;
  html: string;
  bbcode: string;
  thumbnail_url: string;
}

/** Every copyable form of one image link; `name` becomes the alt text. */
export function linkSet(url: string, name: string, widths?: readonly number[] | null): LinkSet {
  // Brackets end Markdown's alt text and a trailing backslash escapes its closing `]`; quotes and
  // angle brackets end the HTML attribute; control characters (a line break) split the link.
  const alt = name.replace(/[[\]"<>\\]/g, "").replace(/[\u0000-\u001f\u007f]/g, " ");
  const attr = url.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
  return {
    url,
    markdown: `![${alt}](${url})`,
    markdown_with_link: `[![${alt}](${url})](${url})`,
    html: `<img src="${attr}" alt="${alt}">`,
    bbcode: `[url=${url}][img]${url}[/img][/url]`,
    thumbnail_url: resizedUrl(url, thumbnailWidth(widths)),
  };
}

/** The copy menu: label and text of each form (the thumbnail only when resizing is on). */
export function linkForms(url: string, name: string, widths?: readonly number[] | null): { label: string; text: string }[] {
  const s = linkSet(url, name, widths);
  const forms = [
    { label: "URL", text: s.url },
    { label: "Markdown", text: s.markdown },
    { label: "Markdown（带链接）", text: s.markdown_with_link },
    { label: "HTML", text: s.html },
    { label: "BBCode", text: s.bbcode },
  ];
  if (s.thumbnail_url !== url) forms.push({ label: "缩略图", text: s.thumbnail_url });
  return forms;
}
