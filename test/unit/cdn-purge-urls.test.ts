/**
 * The purge list of one image (src/ops/cdn-purge.ts): besides recorded variants, every `w`/`format`
 * URL that was answered with the original bytes. With no format configured a `?w=` at or above the
 * image's width still got the original, cacheable for a year, and was left at the CDN.
 */
import { expect, test } from "bun:test";
import { originalForms, purgeUrls } from "../../src/ops/cdn-purge";

const link = "https://img.example/i/abc";

test("widths at or above the image's are purged as ?w= even with no format configured", () => {
  const rows = originalForms({ width: 800, mime: "image/jpeg" }, [400, 1024, 2048], []);
  expect(purgeUrls("https://img.example", "abc", rows).sort()).toEqual([link, `${link}?w=1024`, `${link}?w=2048`].sort());
});

test("with formats: ?w=, each &format= and the stored format by name; narrower widths only when recorded", () => {
  const rows = originalForms({ width: 800, mime: "image/jpeg" }, [400, 1024], ["webp", "jpeg"]);
  expect(purgeUrls("https://img.example", "abc", rows).sort()).toEqual(
    [link, `${link}?format=jpeg`, `${link}?w=1024`, `${link}?w=1024&format=webp`, `${link}?w=1024&format=jpeg`].sort(),
  );
  // An APNG is the original at any width.
  const apng = purgeUrls("https://img.example", "abc", originalForms({ width: 800, mime: "image/apng" }, [400], []));
  expect(apng.sort()).toEqual([link, `${link}?w=400`].sort());
});
