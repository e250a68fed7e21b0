import { child, childrenOf, parseXml, XmlSyntaxError, type XmlElement } from "./xml";

const DAV = "DAV:";

/** One `<D:response>` of a PROPFIND answer, reduced to what the driver needs. */
export interface DavEntry {
  /** The raw href (URL-encoded; absolute path or full URL). */
  href: string;
  /** True when at least one propstat (or the response itself) reports 2xx. */
  ok: boolean;
  collection: boolean;
  size?: number;
  modified?: Date;
}

/**
 * PROPFIND request bodies as rclone sends them: standard props for "other",
 * plus ownCloud's checksums/permissions for nextcloud/owncloud. Asking for named
 * props (instead of allprop) keeps answers small on servers with many dead props.
 */
export const STANDARD_PROPFIND = `<?xml version="1.0" encoding="utf-8"?>
<d:propfind xmlns:d="DAV:"><d:prop><d:displayname/><d:getlastmodified/><d:getcontentlength/><d:resourcetype/></d:prop></d:propfind>`;

export const OWNCLOUD_PROPFIND = `<?xml version="1.0" encoding="utf-8"?>
<d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns"><d:prop><d:displayname/><d:getlastmodified/><d:getcontentlength/><d:resourcetype/><oc:checksums/><oc:permissions/></d:prop></d:propfind>`;

/** "HTTP/1.1 200 OK" → 200; anything unparsable → 0. */
export function statusCode(line: string | undefined): number {
  const m = /^\s*HTTP\/[\d.]+\s+(\d{3})/i.exec(line ?? "");
  return m ? Number(m[1]) : 0;
}

export function parseMultistatus(xml: string): DavEntry[] {
  const root = parseXml(xml);
  if (root.ns !== DAV || root.local !== "multistatus") throw new XmlSyntaxError("根元素不是 DAV:multistatus");
  return childrenOf(root, DAV, "response").map(toEntry);
}

function toEntry(response: XmlElement): DavEntry {
  const href = child(response, DAV, "href")?.text.trim() ?? "";
  const propstats = childrenOf(response, DAV, "propstat");
  // Only props reported with a 2xx status are real values; a 404 propstat lists the absent ones.
  const good = propstats.filter((p) => isSuccess(statusCode(child(p, DAV, "status")?.text)));
  const props = good.flatMap((p) => child(p, DAV, "prop")?.children ?? []);
  const ownStatus = child(response, DAV, "status");
  const ok = good.length > 0 || (propstats.length === 0 && isSuccess(statusCode(ownStatus?.text)));
  const entry: DavEntry = { href, ok, collection: isCollection(props) };
  const length = props.find((p) => p.ns === DAV && p.local === "getcontentlength")?.text.trim();
  if (length && /^\d+$/.test(length)) entry.size = Number(length);
  const lastModified = props.find((p) => p.ns === DAV && p.local === "getlastmodified")?.text.trim();
  const date = lastModified ? new Date(lastModified) : undefined;
  if (date && !Number.isNaN(date.getTime())) entry.modified = date;
  return entry;
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/**
 * DAV:resourcetype containing DAV:collection; failing that, Microsoft's
 * `iscollection` (1/true) which some IIS/SharePoint answers rely on. An unknown
 * resourcetype means a plain resource (RFC 4918 §15.9).
 */
function isCollection(props: XmlElement[]): boolean {
  const type = props.find((p) => p.ns === DAV && p.local === "resourcetype");
  if (type && child(type, DAV, "collection")) return true;
  const flag = props
    .find((p) => p.local.toLowerCase() === "iscollection")
    ?.text.trim()
    .toLowerCase();
  return flag === "1" || flag === "true";
}
