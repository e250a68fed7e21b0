/** UTC 'YYYY-MM-DD HH:MM:SS', the timestamp format of the API and the database. */
export function sqlTime(date: Date | number = Date.now()): string {
  return new Date(date).toISOString().slice(0, 19).replace("T", " ");
}

/**
 * The expiry of something that lives `seconds` from `now`, rounded UP to the whole second the
 * format can hold: rounding down would let a 1-second TTL end a few ms after the upload.
 */
export function expiryTime(now: number, seconds: number): string {
  return sqlTime(Math.ceil((now + seconds * 1000) / 1000) * 1000);
}

export function parseSqlTime(text: string): Date {
  return new Date(`${text.replace(" ", "T")}Z`);
}

export const SQL_TIME_PATTERN = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
