/**
 * logfmt logger on stderr: `time=… level=INFO msg=<中文> key=value…`.
 * Values are quoted when they contain spaces, quotes, '=' or control characters.
 * Callers must never pass credentials or channel parameters as fields.
 */
export type Level = "INFO" | "WARN" | "ERROR";
export type Fields = Record<string, unknown>;

const NEEDS_QUOTES = /[\s"=\\]|[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
/**
 * What JSON.stringify leaves raw but a log reader may take as a line break or a terminal control:
 * DEL, the C1 controls (U+0085 NEL, U+009B CSI) and the Unicode line and paragraph separators
 * (Python's splitlines() splits on them, so a channel name could forge a record).
 */
const RAW_IN_JSON = /[\u007f-\u009f\u2028\u2029]/g;
const escapeRaw = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

export function formatValue(value: unknown): string {
  let text: string;
  if (value === null || value === undefined) text = "";
  else if (value instanceof Error) text = value.message;
  else if (typeof value === "object") text = JSON.stringify(value);
  else text = String(value);
  if (text === "" || NEEDS_QUOTES.test(text)) return JSON.stringify(text).replace(RAW_IN_JSON, escapeRaw);
  return text;
}

export function formatLine(level: Level, msg: string, fields: Fields = {}, now = new Date()): string {
  const parts = [`time=${now.toISOString()}`, `level=${level}`, `msg=${formatValue(msg)}`];
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    parts.push(`${key}=${formatValue(value)}`);
  }
  return parts.join(" ");
}

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

function write(level: Level, msg: string, fields?: Fields) {
  process.stderr.write(`${formatLine(level, msg, fields)}\n`);
}

export const log: Logger = {
  info: (msg, fields) => write("INFO", msg, fields),
  warn: (msg, fields) => write("WARN", msg, fields),
  error: (msg, fields) => write("ERROR", msg, fields),
};
