/**
 * logfmt logger on stderr: `time=… level=INFO msg=<中文> key=value…`.
 * Values are quoted when they contain spaces, quotes, '=' or control characters.
 * Callers must never pass credentials or channel parameters as fields.
 */
export type Level = "INFO" | "WARN" | "ERROR";
export type Fields = Record<string, unknown>;

const NEEDS_QUOTES = /[\s"=\\]|[\u0000-\u001f]/;

export function formatValue(value: unknown): string {
  let text: string;
  if (value === null || value === undefined) text = "";
  else if (value instanceof Error) text = value.message;
  else if (typeof value === "object") text = JSON.stringify(value);
  else text = String(value);
  if (text === "" || NEEDS_QUOTES.test(text)) return JSON.stringify(text);
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
