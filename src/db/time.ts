/** UTC 'YYYY-MM-DD HH:MM:SS', the timestamp format of the API and the database. */
export function sqlTime(date: Date | number = Date.now()): string {
  return new Date(date).toISOString().slice(0, 19).replace("T", " ");
}

export function parseSqlTime(text: string): Date {
  return new Date(`${text.replace(" ", "T")}Z`);
}

export const SQL_TIME_PATTERN = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
