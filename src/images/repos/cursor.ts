/**
 * Keyset cursors of the image and review lists: the last row's sort key and rowid, opaque to
 * clients (base64url of a JSON pair).
 */
import { Invalid } from "../../errors";

export interface Position<K extends string | number = string> {
  key: K;
  rowid: number;
}

export function encodeCursor(p: Position<string | number>): string {
  return Buffer.from(JSON.stringify([p.key, p.rowid])).toString("base64url");
}

/** `kind` is the sort key's type in this list: a cursor of another list (or damaged) is a 400. */
export function decodeCursor(text: string): Position;
export function decodeCursor(text: string, kind: "number"): Position<number>;
export function decodeCursor(text: string, kind: "string" | "number" = "string"): Position<string | number> {
  try {
    const [key, rowid] = JSON.parse(Buffer.from(text, "base64url").toString()) as unknown[];
    const keyOk = kind === "string" ? typeof key === "string" : Number.isSafeInteger(key);
    if (keyOk && Number.isSafeInteger(rowid)) return { key: key as string | number, rowid: rowid as number };
  } catch {
    // falls through to the refusal
  }
  throw new Invalid("参数 cursor 无效");
}
