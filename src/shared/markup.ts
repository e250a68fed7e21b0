/**
 * Text made safe inside XML or HTML, as element content or a quoted attribute value: the five
 * markup characters become entities, and the C0 controls XML 1.0 cannot carry (all but tab, line
 * feed and carriage return) become character references, so the document still parses. One
 * escaper for the S3 answers, the S3 client's request bodies, the OAuth callback page, the API
 * docs page and Lsky's copyable tag: `&apos;` is valid in XML and in HTML5.
 */
export function escapeMarkup(text: string): string {
  return text.replace(/[&<>"'\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, (c) => {
    switch (c) {
      case "&":
        return "&amp;";
      case "<":
        return "&lt;";
      case ">":
        return "&gt;";
      case '"':
        return "&quot;";
      case "'":
        return "&apos;";
      default:
        return `&#${c.charCodeAt(0)};`;
    }
  });
}
