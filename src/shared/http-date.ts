/**
 * HTTP-date (RFC 9110 5.6.7): IMF-fixdate, and the two obsolete forms a recipient must still
 * accept (RFC 850 and asctime). Anything else is no date at all: RFC 9110 13.1.3 has a
 * recipient ignore an If-Modified-Since that is not one, where `Date.parse` read "2030" or
 * "2030-01-01" as a date and a 304 followed for bytes the client never had.
 */
const DAY = "(Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const LONG_DAY = "(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const MONTH = `(${MONTHS.join("|")})`;
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";

const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC_850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/** Milliseconds since the epoch, or undefined when `text` is not an HTTP-date (or names no real moment). */
export function parseHttpDate(text: string): number | undefined {
  const value = text.trim();
  let m = IMF_FIXDATE.exec(value);
  if (m) return moment(Number(m[4]), m[3]!, Number(m[2]), m[5]!, m[6]!, m[7]!);
  m = RFC_850.exec(value);
  if (m) {
    // RFC 9110: a two-digit year more than 50 years in the future is the most recent past year with those digits.
    const thisYear = new Date().getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[4]);
    if (year > thisYear + 50) year -= 100;
    return moment(year, m[3]!, Number(m[2]), m[5]!, m[6]!, m[7]!);
  }
  m = ASCTIME.exec(value);
  if (m) return moment(Number(m[7]), m[2]!, Number(m[3]!.trim()), m[4]!, m[5]!, m[6]!);
  return undefined;
}

function moment(year: number, month: string, day: number, hh: string, mm: string, ss: string): number | undefined {
  const [h, min, s] = [Number(hh), Number(mm), Number(ss)];
  // 60 is a leap second, which the RFC allows; Date has none, so it counts as the next second.
  if (h > 23 || min > 59 || s > 60 || day < 1) return undefined;
  const monthIndex = MONTHS.indexOf(month);
  const ms = Date.UTC(year, monthIndex, day, h, min, s);
  // 31 Feb and the like roll over in Date.UTC: not a date.
  return new Date(Date.UTC(year, monthIndex, day)).getUTCDate() === day ? ms : undefined;
}
