/** `/i/{id}.{ext}` (for forums that want an extension) is the same image as `/i/{id}`, and the shared copy forms. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { linkForms, linkSet } from "../../src/shared/links";
import { form, makeJpeg, makePng } from "../helpers/images";
import { sha256, startClientFixture, type ClientFixture } from "./fixture";

const COMPARED = ["content-type", "content-length", "etag", "cache-control", "vary", "last-modified", "accept-ranges"];

describe("link formats", () => {
  let f: ClientFixture;
  let jpegId: string;
  let pngId: string;
  beforeAll(async () => {
    f = await startClientFixture();
    const up = async (bytes: Uint8Array, name: string) => {
      const res = await fetch(f.server.url("/api/upload"), { method: "POST", headers: { authorization: `Bearer ${f.token}` }, body: form(bytes, name) });
      return ((await res.json()) as { id: string }).id;
    };
    jpegId = await up(await makeJpeg(700, 400, 41), "wide.jpg");
    pngId = await up(await makePng(60, 40, 42), "small.png");
  });
  afterAll(async () => {
    await f.dispose();
  });

  async function both(query: string, init: RequestInit = {}) {
    const plain = await fetch(f.server.url(`/i/${jpegId}${query}`), init);
    const withExt = await fetch(f.server.url(`/i/${jpegId}.jpg${query}`), init);
    return { plain, withExt };
  }

  async function expectSame(query: string, init: RequestInit = {}) {
    const { plain, withExt } = await both(query, init);
    expect(withExt.status).toBe(plain.status);
    for (const h of COMPARED) expect(`${h}: ${withExt.headers.get(h)}`).toBe(`${h}: ${plain.headers.get(h)}`);
    expect(sha256(await withExt.arrayBuffer())).toBe(sha256(await plain.arrayBuffer()));
    return plain;
  }

  test("/i/{id}.jpg serves the same bytes and headers as /i/{id}: original, negotiated WebP, resized, HEAD", async () => {
    expect((await expectSame("")).status).toBe(200);
    const webp = await expectSame("", { headers: { accept: "image/avif,image/webp,*/*" } });
    expect(webp.headers.get("content-type")).toBe("image/webp");
    expect((await expectSame("?w=320")).status).toBe(200);
    expect((await expectSame("?w=320&format=png")).headers.get("content-type")).toBe("image/png");
    expect((await expectSame("", { method: "HEAD" })).status).toBe(200);
    expect((await expectSame("?w=123")).status).toBe(400);
  });

  test("conditional requests and ranges behave the same", async () => {
    const etag = (await fetch(f.server.url(`/i/${jpegId}`))).headers.get("etag")!;
    expect((await expectSame("", { headers: { "if-none-match": etag } })).status).toBe(304);
    expect((await expectSame("", { headers: { range: "bytes=0-99" } })).status).toBe(206);
  });

  test("only the image's own extension is a link: other extensions and forms are 404", async () => {
    for (const path of [`/i/${jpegId}.png`, `/i/${jpegId}.JPG`, `/i/${jpegId}.jpeg`, `/i/${jpegId}.jpg.jpg`, `/i/${pngId}.jpg`, `/i/.jpg`]) {
      expect(`${path} ${(await fetch(f.server.url(path))).status}`).toBe(`${path} 404`);
    }
    const png = await fetch(f.server.url(`/i/${pngId}.png`));
    expect(png.status).toBe(200);
    expect(png.headers.get("content-type")).toBe("image/png");
  });

  test("copy forms: URL, Markdown, Markdown with link, HTML, BBCode and the smallest allowed width as thumbnail", () => {
    const url = "https://img.example.com/i/AbCdEfGhIj.jpg";
    const s = linkSet(url, 'a "b" [c].jpg', [1280, 320, 640]);
    expect(s).toEqual({
      url,
      markdown: `![a b c.jpg](${url})`,
      markdown_with_link: `[![a b c.jpg](${url})](${url})`,
      html: `<img src="${url}" alt="a b c.jpg">`,
      bbcode: `[url=${url}][img]${url}[/img][/url]`,
      thumbnail_url: `${url}?w=320`,
    });
    expect(linkForms(url, "x", [320]).map((f) => f.label)).toEqual(["URL", "Markdown", "Markdown（带链接）", "HTML", "BBCode", "缩略图"]);
    // Resizing switched off: no thumbnail form, the thumbnail address is the original.
    expect(linkForms(url, "x", null).map((f) => f.label)).not.toContain("缩略图");
    expect(linkSet(url, "x", []).thumbnail_url).toBe(url);
  });

  test("every form stays well-formed whatever the file name (a trailing backslash, brackets, quotes, line breaks)", () => {
    const url = "https://img.example.com/i/AbCdEfGhIj.jpg";
    expect(linkSet(url, "holiday\\", null).markdown).toBe(`![holiday](${url})`);
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 60 }), (name) => {
        const s = linkSet(url, name, null);
        const alt = /^!\[([^\]]*)\]\(([^)]*)\)$/.exec(s.markdown);
        expect(alt?.[2]).toBe(url);
        // No backslash (it would escape the closing bracket) and no line break inside the alt text.
        expect(alt![1]).not.toMatch(/[\\\n\r]/);
        expect(s.markdown_with_link).toBe(`[${s.markdown}](${url})`);
        expect(s.html).toMatch(/^<img src="[^"]*" alt="[^"<>]*">$/);
      }),
      { seed: 20261127, numRuns: 2000 },
    );
  });
});
