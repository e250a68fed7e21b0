/**
 * The `/s3/` listing parameters at and past their bounds (max-keys, prefix and delimiter, v1 marker,
 * v2 continuation-token and start-after, encoding-type), the write conditions' header forms
 * (If-Match / If-None-Match on PutObject, Complete, CopyObject), and folder keys. In-process through
 * the router's own `handle`; bench: helpers/s3-rules.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { S3Object } from "../../src/s3/object";
import { deleteFolder, folderByKey, isFolderKey, isFolderObject, putFolder } from "../../src/s3/folders";
import { isCommonPrefix } from "../../src/s3/ops/list";
import type { S3Request } from "../../src/s3/request";
import { etagList, keyUnchanged, writeExpectation } from "../../src/s3/write-conditions";
import { app, blobId, call, clearKeys, errorLabel, MD5, ORIGIN, refusal, storeKeys, tag, tags, useS3RuleContext, userId } from "../helpers/s3-rules";

useS3RuleContext();

describe("listing parameters", () => {
  const KEYS = ["a.jpg", "b c.jpg", "dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"];
  beforeAll(() => {
    clearKeys();
    storeKeys(KEYS);
  });
  afterAll(clearKeys);

  interface Listed {
    outcome: string;
    keys: string[];
    prefixes: string[];
    fields: Record<string, string | undefined>;
  }
  const FIELDS = [
    "Name",
    "Prefix",
    "Marker",
    "MaxKeys",
    "Delimiter",
    "EncodingType",
    "IsTruncated",
    "NextMarker",
    "KeyCount",
    "ContinuationToken",
    "NextContinuationToken",
    "StartAfter",
  ];
  async function list(query: string): Promise<Listed> {
    const a = await call("GET", `/s3/kura?${query}`);
    if (a.status === 200) expect(a.xml).toContain('<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">');
    const fields: Record<string, string | undefined> = {};
    for (const name of FIELDS) if (tag(a.xml, name) !== undefined) fields[name] = tag(a.xml, name);
    return { outcome: a.outcome, keys: tags(a.xml, "Key"), prefixes: tags(a.xml, "Prefix").slice(1), fields };
  }
  const token = (text: string) => Buffer.from(text).toString("base64url");

  test("max-keys at and past its bounds (v1)", async () => {
    const zero = await list("max-keys=0");
    expect(zero).toEqual({
      outcome: "200 ListBucketResult",
      keys: [],
      prefixes: [],
      fields: { Name: "kura", Prefix: "", Marker: "", MaxKeys: "0", IsTruncated: "false" },
    });
    const one = await list("max-keys=1");
    expect([one.keys, one.fields.MaxKeys, one.fields.IsTruncated, one.fields.NextMarker]).toEqual([["a.jpg"], "1", "true", undefined]);
    for (const [raw, echoed] of [
      ["1000", "1000"],
      ["1001", "1000"],
      ["", "1000"],
    ]) {
      const page = await list(`max-keys=${raw}`);
      expect([raw, page.keys, page.fields.MaxKeys, page.fields.IsTruncated]).toEqual([raw, KEYS, echoed, "false"]);
    }
    const exact = await list(`max-keys=${KEYS.length}`);
    expect([exact.keys.length, exact.fields.IsTruncated]).toEqual([KEYS.length, "false"]);
    for (const raw of ["-1", "abc", "1.5", "%201"]) {
      expect([raw, (await list(`max-keys=${raw}`)).outcome]).toEqual([raw, "400 InvalidArgument"]);
      expect([raw, (await list(`list-type=2&max-keys=${raw}`)).outcome]).toEqual([raw, "400 InvalidArgument"]);
    }
  });

  test("max-keys at and past its bounds (v2): 0 is an empty page that is not truncated", async () => {
    const zero = await list("list-type=2&max-keys=0");
    expect(zero).toEqual({
      outcome: "200 ListBucketResult/V2",
      keys: [],
      prefixes: [],
      fields: { Name: "kura", Prefix: "", MaxKeys: "0", KeyCount: "0", IsTruncated: "false" },
    });
    const two = await list("list-type=2&max-keys=2");
    expect([two.keys, two.fields.KeyCount, two.fields.IsTruncated, two.fields.NextContinuationToken]).toEqual([
      ["a.jpg", "b c.jpg"],
      "2",
      "true",
      token("k:b c.jpg"),
    ]);
    const all = await list("list-type=2&max-keys=1001");
    expect([all.keys, all.fields.MaxKeys, all.fields.KeyCount, all.fields.NextContinuationToken]).toEqual([KEYS, "1000", String(KEYS.length), undefined]);
  });

  test("prefix and delimiter: CommonPrefixes, and the delimiter echoed only when given", async () => {
    const v1 = await list("prefix=dir%2F&delimiter=%2F");
    expect([v1.keys, v1.prefixes, v1.fields.Prefix, v1.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg"], ["dir/sub/"], "dir/", "/"]);
    const v2 = await list("list-type=2&prefix=dir%2F&delimiter=%2F");
    expect([v2.keys, v2.prefixes, v2.fields.KeyCount, v2.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg"], ["dir/sub/"], "3", "/"]);
    const flat = await list("prefix=dir%2F&delimiter=");
    expect([flat.keys, flat.prefixes, flat.fields.Delimiter]).toEqual([["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"], [], undefined]);
    const v2flat = await list("list-type=2&prefix=dir%2Fsub");
    expect([v2flat.keys, v2flat.fields.Delimiter, v2flat.fields.Prefix]).toEqual([["dir/sub/d.jpg", "dir/sub/e.jpg"], undefined, "dir/sub"]);
    // `+` in the query is a space: the prefix `b c` finds `b c.jpg`.
    expect((await list("prefix=b+c")).keys).toEqual(["b c.jpg"]);
  });

  test("v1 marker: starts after it, skips a CommonPrefix marker's whole group, NextMarker only with a delimiter", async () => {
    expect((await list("marker=dir%2Fb.jpg")).keys).toEqual(["dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    expect((await list("marker=dir%2Fb.jpg")).fields.Marker).toBe("dir/b.jpg");
    // rclone --s3-list-chunk: the marker is the CommonPrefix `dir/`, whose keys were listed as that prefix.
    expect((await list("delimiter=%2F&marker=dir%2F")).keys).toEqual(["e.jpg", "中.jpg"]);
    // Without a delimiter `dir/` is only a key to start after.
    expect((await list("marker=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    // Under a prefix, the marker `dir/sub/` is that listing's CommonPrefix.
    expect((await list("prefix=dir%2F&delimiter=%2F&marker=dir%2Fsub%2F")).keys).toEqual([]);
    // Without a delimiter nothing is a CommonPrefix, not even a marker equal to the prefix.
    expect((await list("prefix=dir&marker=dir")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"]);
    // A marker equal to the prefix is no CommonPrefix: the keys under it follow.
    expect((await list("prefix=dir%2F&delimiter=%2F&marker=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg"]);
    // A marker before the prefix starts at the prefix; one past it leaves nothing.
    expect((await list("prefix=dir%2F&marker=a.jpg")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg"]);
    expect((await list("prefix=dir%2F&marker=e")).keys).toEqual([]);
    const paged = await list("delimiter=%2F&max-keys=3");
    expect([paged.keys, paged.prefixes, paged.fields.IsTruncated, paged.fields.NextMarker]).toEqual([["a.jpg", "b c.jpg"], ["dir/"], "true", "dir/"]);
    const byKey = await list("delimiter=%2F&max-keys=1");
    expect(byKey.fields.NextMarker).toBe("a.jpg");
    const last = await list("delimiter=%2F&max-keys=5");
    expect([last.fields.IsTruncated, last.fields.NextMarker]).toEqual(["false", undefined]);
  });

  test("v2: continuation-token goes on where the page ended; start-after is read like a marker; the token wins", async () => {
    const first = await list("list-type=2&delimiter=%2F&max-keys=3");
    expect([first.keys, first.prefixes, first.fields.NextContinuationToken, first.fields.ContinuationToken]).toEqual([
      ["a.jpg", "b c.jpg"],
      ["dir/"],
      token("p:dir/"),
      undefined,
    ]);
    const second = await list(`list-type=2&delimiter=%2F&max-keys=3&continuation-token=${first.fields.NextContinuationToken}`);
    expect([second.keys, second.fields.ContinuationToken, second.fields.IsTruncated]).toEqual([["e.jpg", "中.jpg"], token("p:dir/"), "false"]);
    // A key token starts after that key; the token wins over start-after.
    const byKey = await list(`list-type=2&continuation-token=${token("k:dir/sub/e.jpg")}&start-after=a.jpg`);
    expect([byKey.keys, byKey.fields.StartAfter]).toEqual([["e.jpg", "中.jpg"], "a.jpg"]);
    // A prefix token is a CommonPrefix even without a delimiter.
    expect((await list(`list-type=2&continuation-token=${token("p:dir/")}`)).keys).toEqual(["e.jpg", "中.jpg"]);
    // Nothing sorts after a prefix of only U+10FFFF: an empty page.
    const end = await list(`list-type=2&continuation-token=${token("p:\u{10FFFF}")}`);
    expect([end.keys, end.fields.IsTruncated]).toEqual([[], "false"]);
    expect((await list(`list-type=2&continuation-token=${token("k:")}`)).keys).toEqual(KEYS);
    expect((await list("list-type=2&start-after=dir%2Fc.jpg")).keys).toEqual(["dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    expect((await list("list-type=2&delimiter=%2F&start-after=dir%2F")).keys).toEqual(["e.jpg", "中.jpg"]);
    expect((await list("list-type=2&start-after=dir%2F")).keys).toEqual(["dir/b.jpg", "dir/c.jpg", "dir/sub/d.jpg", "dir/sub/e.jpg", "e.jpg", "中.jpg"]);
    // An empty token is no token: start-after applies, and no ContinuationToken is echoed.
    const empty = await list("list-type=2&continuation-token=&start-after=e.jpg");
    expect([empty.keys, empty.fields.ContinuationToken, empty.fields.StartAfter]).toEqual([["中.jpg"], undefined, "e.jpg"]);
    expect((await list("list-type=2")).fields.StartAfter).toBeUndefined();
  });

  const badTokens: [rule: string, raw: string][] = [
    ["not base64url of k:/p:", token("x:abc")],
    ["no colon", token("kabc")],
    ["capital K", token("K:abc")],
    ["the kind not first", token(" k:abc")],
    ["garbage", "%%%"],
  ];
  test.each(badTokens)("a continuation-token with %s is 400 InvalidArgument", async (_rule, raw) => {
    const a = await call("GET", `/s3/kura?list-type=2&continuation-token=${encodeURIComponent(raw)}`);
    expect(a.outcome).toBe("400 InvalidArgument");
    expect(tag(a.xml, "Message")).toContain("continuation-token");
  });

  test("encoding-type=url encodes every name in the answer and says so; other types are refused", async () => {
    const v1 = await list("encoding-type=url&prefix=dir%2F&delimiter=%2F&marker=dir%2Fb.jpg&max-keys=1");
    expect(v1.fields).toEqual({
      Name: "kura",
      Prefix: "dir%2F",
      Marker: "dir%2Fb.jpg",
      MaxKeys: "1",
      Delimiter: "%2F",
      EncodingType: "url",
      IsTruncated: "true",
      NextMarker: "dir%2Fc.jpg",
    });
    expect(v1.keys).toEqual(["dir%2Fc.jpg"]);
    const v2 = await list("list-type=2&encoding-type=url&prefix=dir%2F&delimiter=%2F&start-after=dir%2Fb.jpg");
    expect([v2.keys, v2.prefixes, v2.fields.StartAfter, v2.fields.Delimiter, v2.fields.EncodingType]).toEqual([
      ["dir%2Fc.jpg"],
      ["dir%2Fsub%2F"],
      "dir%2Fb.jpg",
      "%2F",
      "url",
    ]);
    expect((await list("encoding-type=url&prefix=%E4%B8%AD")).keys).toEqual(["%E4%B8%AD.jpg"]);
    expect((await list("prefix=b")).fields.EncodingType).toBeUndefined();
    expect((await list("list-type=2&prefix=b")).fields.EncodingType).toBeUndefined();
    expect((await list("encoding-type=URL")).outcome).toBe("400 InvalidArgument");
    expect((await list("list-type=2&encoding-type=xml")).outcome).toBe("400 InvalidArgument");
  });

  const commonPrefixes: [rule: string, marker: string, prefix: string, delimiter: string, expected: boolean][] = [
    ["a group at the top", "dir/", "", "/", true],
    ["a group under the prefix", "dir/sub/", "dir/", "/", true],
    ["the prefix itself is a key", "dir/", "dir/", "/", false],
    ["no delimiter, no groups", "dir/", "", "", false],
    ["a key, not ending at the delimiter", "dir/a.jpg", "", "/", false],
    ["two delimiters: only the first one ends a group", "dir/sub/", "", "/", false],
    ["not under the prefix", "dir/", "other/", "/", false],
    ["a longer delimiter", "a--", "", "--", true],
    ["a longer delimiter cut short", "a-", "", "--", false],
    ["a delimiter inside the prefix does not count", "a/b", "a/", "/", false],
    ["the delimiter right after the prefix", "a//", "a/", "/", true],
    ["the delimiter alone, at the very start", "/", "", "/", true],
    ["an empty delimiter: a marker equal to the prefix is no group", "dir", "dir", "", false],
    ["a marker outside the prefix that ends at a delimiter", "x/", "a", "/", false],
    ["a marker without the delimiter, shorter than it", "a", "", "--", false],
  ];
  test.each(commonPrefixes)("isCommonPrefix: %s (%j, prefix %j, delimiter %j) → %p", (_rule, marker, prefix, delimiter, expected) => {
    expect(isCommonPrefix(marker, prefix, delimiter)).toBe(expected);
  });
});

describe("write conditions (If-Match / If-None-Match on PutObject, Complete, CopyObject)", () => {
  const reqWith = (headers: Record<string, string>) =>
    ({ request: new Request(ORIGIN, { method: "PUT", headers }), user: { id: userId } }) as unknown as S3Request;
  const TAKEN = "cond/taken.jpg";
  const FREE = "cond/free.jpg";
  beforeAll(() => {
    clearKeys();
    storeKeys([TAKEN]);
    putFolder(app, userId, "cond/folder/");
  });
  afterAll(clearKeys);

  const cases: [rule: string, headers: Record<string, string>, key: string, expected: string][] = [
    ["no condition: nothing to hold", {}, TAKEN, "none"],
    ["If-None-Match: * on a free key", { "if-none-match": "*" }, FREE, "free"],
    ["If-None-Match: * with blanks", { "if-none-match": "  *  " }, FREE, "free"],
    ["If-None-Match: * on a taken key", { "if-none-match": "*" }, TAKEN, "412 PreconditionFailed"],
    ["If-None-Match: * on a folder marker", { "if-none-match": "*" }, "cond/folder/", "412 PreconditionFailed"],
    ["If-None-Match with an ETag is not offered", { "if-none-match": `"${MD5}"` }, TAKEN, "501 NotImplemented"],
    ["If-None-Match with an ETag, free key", { "if-none-match": `"${MD5}"` }, FREE, "501 NotImplemented"],
    ["If-None-Match empty", { "if-none-match": "" }, FREE, "501 NotImplemented"],
    ["If-None-Match: *, * is not *", { "if-none-match": "*, *" }, FREE, "501 NotImplemented"],
    ["If-Match: the current ETag", { "if-match": `"${MD5}"` }, TAKEN, "taken"],
    ["If-Match: a bare ETag (Java SDK v1)", { "if-match": MD5 }, TAKEN, "taken"],
    ["If-Match: a weak ETag", { "if-match": `W/"${MD5}"` }, TAKEN, "taken"],
    ["If-Match: a list holding it", { "if-match": `"x", ${MD5} ,"y"` }, TAKEN, "taken"],
    ["If-Match: *", { "if-match": "*" }, TAKEN, "taken"],
    ["If-Match: * in a list", { "if-match": `"x", *` }, TAKEN, "taken"],
    ["If-Match: another ETag", { "if-match": '"0000"' }, TAKEN, "412 PreconditionFailed"],
    ["If-Match: the ETag in other case", { "if-match": `"${MD5.toUpperCase()}"` }, TAKEN, "412 PreconditionFailed"],
    ["If-Match: empty", { "if-match": "" }, TAKEN, "412 PreconditionFailed"],
    ["If-Match on a free key", { "if-match": `"${MD5}"` }, FREE, "404 NoSuchKey"],
    ["If-Match: * on a free key", { "if-match": "*" }, FREE, "404 NoSuchKey"],
    ["If-Match matching and If-None-Match: * on a taken key", { "if-match": `"${MD5}"`, "if-none-match": "*" }, TAKEN, "412 PreconditionFailed"],
    ["If-Match not matching and If-None-Match: * on a free key", { "if-match": '"0000"', "if-none-match": "*" }, FREE, "404 NoSuchKey"],
    ["If-None-Match other than * is refused before If-Match is looked at", { "if-match": '"0000"', "if-none-match": '"0000"' }, FREE, "501 NotImplemented"],
  ];
  test.each(cases)("%s → %s", async (_rule, headers, key, expected) => {
    const id = app.db.query<{ id: string }, [string]>("SELECT id FROM images WHERE object_key = ?").get(TAKEN)!.id;
    let out: string;
    try {
      const got = await writeExpectation(app, reqWith(headers), key);
      out = got === undefined ? "none" : got.imageId === null ? "free" : got.imageId === id ? "taken" : `other ${got.imageId}`;
    } catch (err) {
      out = errorLabel(err);
    }
    expect(out).toBe(expected);
  });

  const lists: [header: string, tags: string[]][] = [
    ['"a"', ['"a"']],
    ['"a", W/"b", c', ['"a"', '"b"', '"c"']],
    ["*", ["*"]],
    [" * ", ["*"]],
    ["W/*", ["*"]],
    ["W/c", ['"c"']],
    ['"a",', ['"a"', '""']],
    ['w/"a"', ['"w/"a""']],
    ['"aW/b"', ['"aW/b"']],
  ];
  test.each(lists)("etagList(%j) → %j", (header, expected) => {
    expect(etagList(header)).toEqual(expected);
  });

  test("keyUnchanged: the key still holds what the condition saw, else 412", () => {
    const id = app.db.query<{ id: string }, [string]>("SELECT id FROM images WHERE object_key = ?").get(TAKEN)!.id;
    expect(refusal(() => keyUnchanged(app, userId, FREE, { imageId: null }))).toBe("ok");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: id }))).toBe("ok");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: null }))).toBe("412 PreconditionFailed");
    expect(refusal(() => keyUnchanged(app, userId, TAKEN, { imageId: "other" }))).toBe("412 PreconditionFailed");
    expect(refusal(() => keyUnchanged(app, userId, FREE, { imageId: id }))).toBe("412 PreconditionFailed");
  });
});

describe("folder keys", () => {
  const cases: [key: string, folder: boolean][] = [
    ["a/", true],
    ["a/b/", true],
    ["中/", true],
    ["a", false],
    ["", false],
    ["/", false],
    ["a//", false],
    ["/a/", false],
    ["./", false],
    ["../", false],
    ["a/./", false],
    ["a\\/", false],
  ];
  test.each(cases)("isFolderKey(%j) → %p", (key, folder) => {
    expect(isFolderKey(key)).toBe(folder);
  });

  test("a folder marker is stored, found, told apart from an image and deleted once", () => {
    clearKeys();
    expect(folderByKey(app, userId, "f/")).toBeUndefined();
    putFolder(app, userId, "f/");
    putFolder(app, userId, "f/");
    const folder = folderByKey(app, userId, "f/")!;
    expect([folder.object_key, folder.size, isFolderObject(folder)]).toEqual(["f/", 0, true]);
    expect(isFolderObject({ ...folder, blob_id: blobId } as S3Object)).toBe(false);
    expect(deleteFolder(app, userId, "f/")).toBe(true);
    expect(deleteFolder(app, userId, "f/")).toBe(false);
    expect(folderByKey(app, userId, "f/")).toBeUndefined();
  });
});
