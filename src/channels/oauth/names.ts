/**
 * Object names as rclone writes them on providers that refuse some characters
 * (rclone's lib/encoder): a refused character becomes a look-alike (fullwidth
 * form or a control picture), and a look-alike that was really in the name is
 * quoted with '‛'. Writing the same names as rclone keeps the exported remote
 * able to read every object Kura stored, and the mapping is reversible so a
 * listing returns the original keys.
 */
export interface NameRules {
  /** Characters replaced anywhere in a name by their fullwidth form (U+FF01…FF5E). */
  anywhere: string;
  leftSpace?: boolean;
  leftTilde?: boolean;
  rightSpace?: boolean;
  rightPeriod?: boolean;
  /** DEL (0x7F) → ␡. */
  del?: boolean;
}

const QUOTE = "\u201B";
const SPACE_PICTURE = "\u2420";
const DEL_PICTURE = "\u2421";
const fullwidth = (c: string) => String.fromCharCode(c.charCodeAt(0) + 0xfee0);
const halfwidth = (c: string) => String.fromCharCode(c.charCodeAt(0) - 0xfee0);

/** OneDrive (rclone's encodings.OneDrive): Windows-forbidden characters and edge spaces / tilde / period. */
export const ONEDRIVE_NAMES: NameRules = { anywhere: '"*:<>?\\|', leftSpace: true, leftTilde: true, rightSpace: true, rightPeriod: true };
/** Dropbox (rclone's encodings.Dropbox): trailing space and DEL. */
export const DROPBOX_NAMES: NameRules = { anywhere: "\\", rightSpace: true, del: true };

function lookalikes(rules: NameRules): Set<string> {
  const set = new Set([...rules.anywhere].map(fullwidth));
  if (rules.leftSpace || rules.rightSpace) set.add(SPACE_PICTURE);
  if (rules.leftTilde) set.add(fullwidth("~"));
  if (rules.rightPeriod) set.add(fullwidth("."));
  if (rules.del) set.add(DEL_PICTURE);
  return set;
}

/** Encodes one path segment. */
export function encodeName(name: string, rules: NameRules): string {
  const chars = [...name];
  const quoted = lookalikes(rules);
  return chars
    .map((c, i) => {
      const first = i === 0;
      const last = i === chars.length - 1;
      if (rules.anywhere.includes(c)) return fullwidth(c);
      if (c === " " && ((first && rules.leftSpace) || (last && rules.rightSpace))) return SPACE_PICTURE;
      if (c === "~" && first && rules.leftTilde) return fullwidth(c);
      if (c === "." && last && rules.rightPeriod) return fullwidth(c);
      if (c === "\u007f" && rules.del) return DEL_PICTURE;
      if (c === QUOTE || quoted.has(c)) return QUOTE + c;
      return c;
    })
    .join("");
}

/** Reverses encodeName. */
export function decodeName(name: string, rules: NameRules): string {
  const quoted = lookalikes(rules);
  let out = "";
  const chars = [...name];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === QUOTE && i + 1 < chars.length) {
      out += chars[++i];
    } else if (quoted.has(c)) {
      out += c === SPACE_PICTURE ? " " : c === DEL_PICTURE ? "\u007f" : halfwidth(c);
    } else {
      out += c;
    }
  }
  return out;
}

/** A '/'-separated relative path, segment by segment. */
export function encodePath(path: string, rules: NameRules): string {
  return path === ""
    ? ""
    : path
        .split("/")
        .map((s) => encodeName(s, rules))
        .join("/");
}
