/** Made on first use: building a Segmenter loads ICU's break data (~75 ms), a tenth of a start. */
let graphemes: Intl.Segmenter | undefined;

/**
 * `text` cut to at most `max` UTF-16 code units at the last grapheme boundary that fits, so a
 * cut never splits a surrogate pair (SQLite would store the half as U+FFFD) nor a character
 * built of several code points (a flag, a ZWJ emoji, a letter with its accent). One grapheme
 * longer than `max` by itself (a base with hundreds of combining marks) is cut at a code point.
 */
export function truncateText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = 0;
  graphemes ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  for (const { index, segment } of graphemes.segment(text)) {
    if (index + segment.length > max) break;
    end = index + segment.length;
  }
  if (end > 0) return text.slice(0, end);
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** Whether `text` holds Chinese: Kura's own messages are written in it, a runtime's are not. */
export function hasChinese(text: string): boolean {
  return /[\u4e00-\u9fff]/.test(text);
}
