/**
 * Which renders keep a wide gamut. sharp converts every variant to sRGB and drops the profile, which
 * is right for most photos but clips the saturated colours of a Display P3 (iPhone) or Adobe RGB
 * original on the wide-gamut screens that show them (ΔE 30-38 on reds and greens, image-fidelity
 * audit MED-2). A source with an RGB profile other than sRGB is rendered in Display P3 instead,
 * with its ~0.5 KB profile embedded; every other source stays sRGB without one.
 *
 * Only the ICC header and its `desc` tag are read (ICC.1 v2 `desc` or v4 `mluc`), with every offset
 * checked: the profile is whatever the upload carried.
 */

/** The profile's description (its `desc` tag), or undefined when it has none or it cannot be read. */
export function iccDescription(icc: Uint8Array): string | undefined {
  const view = new DataView(icc.buffer, icc.byteOffset, icc.byteLength);
  if (icc.length < 132) return undefined;
  const count = view.getUint32(128);
  for (let i = 0; i < count && 132 + (i + 1) * 12 <= icc.length; i++) {
    const entry = 132 + i * 12;
    if (ascii(icc, entry, 4) !== "desc") continue;
    const offset = view.getUint32(entry + 4);
    const size = view.getUint32(entry + 8);
    if (offset + size > icc.length || size < 12) return undefined;
    return readText(icc.subarray(offset, offset + size));
  }
  return undefined;
}

/** v2 `desc`: an ASCII count and string; v4 `mluc`: UTF-16BE records, the first one taken. */
function readText(tag: Uint8Array): string | undefined {
  const view = new DataView(tag.buffer, tag.byteOffset, tag.byteLength);
  const type = ascii(tag, 0, 4);
  if (type === "desc") {
    const length = view.getUint32(8);
    if (12 + length > tag.length) return undefined;
    return ascii(tag, 12, length).replace(/\0+$/, "");
  }
  if (type === "mluc" && tag.length >= 28) {
    const length = view.getUint32(20);
    const offset = view.getUint32(24);
    if (offset + length > tag.length) return undefined;
    let text = "";
    for (let i = 0; i + 1 < length; i += 2) text += String.fromCharCode(view.getUint16(offset + i));
    return text;
  }
  return undefined;
}

function ascii(bytes: Uint8Array, offset: number, length: number): string {
  if (offset + length > bytes.length) return "";
  let text = "";
  for (let i = offset; i < offset + length; i++) text += String.fromCharCode(bytes[i]!);
  return text;
}

/** An RGB profile that is not sRGB (by its description): render in Display P3 to keep the source's gamut. */
export function isWideRgbProfile(icc: Uint8Array | undefined): boolean {
  if (!icc || icc.length < 132 || ascii(icc, 16, 4) !== "RGB ") return false;
  const description = iccDescription(icc);
  return description !== undefined && description.trim() !== "" && !/srgb/i.test(description);
}
