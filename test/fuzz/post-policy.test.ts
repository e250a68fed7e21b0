/**
 * Fuzzing verifyPostPolicy (browser-form uploads) with validly signed but arbitrary policy
 * documents and form fields: every outcome is an acceptance or an S3 auth error in Chinese within
 * the parser budget, and every acceptance is one an independent reading of the document allows
 * (not expired, every sent field under a condition it meets, every condition about a sent field).
 * A form accepted once is refused after any one-character change to its policy or signature.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createHmac } from "node:crypto";
import { verifyPostPolicy } from "../../src/s3/post-policy";
import { S3AuthError } from "../../src/s3/s3-auth-error";
import { expectContained, fuzzParams, hostileString } from "./fuzz-support";

const ACCESS_KEY = "KURAFUZZPOLICY";
const SECRET = "fuzz-policy-secret";
const DAY = "20261128";
const AMZ_DATE = `${DAY}T101010Z`;
const CREDENTIAL = `${ACCESS_KEY}/${DAY}/auto/s3/aws4_request`;
const NOW = Date.parse("2026-11-28T12:00:00Z");
const BUCKET = "kura";
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();
const SIGNING_KEY = hmac(hmac(hmac(hmac(`AWS4${SECRET}`, DAY), "auto"), "s3"), "aws4_request");
const sign = (policy: string) => createHmac("sha256", SIGNING_KEY).update(policy).digest("hex");
const lookup = (id: string) => (id === ACCESS_KEY ? SECRET : undefined);

const FIELD_NAMES = [
  "bucket",
  "key",
  "content-type",
  "x-amz-meta-a",
  "x-amz-meta-b",
  "success_action_status",
  "x-amz-algorithm",
  "x-amz-credential",
  "x-amz-date",
  "x-ignore-me",
  "file",
];
const fieldName = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...FIELD_NAMES) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map((s) => s.toLowerCase()) },
);
const value = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("", "kura", "a", "ab", "image/png", "201", "AWS4-HMAC-SHA256", CREDENTIAL, AMZ_DATE) },
  { weight: 1, arbitrary: hostileString },
);
const condition = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fieldName, value).map(([f, v]) => ({ [f]: v })) },
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom("eq", "starts-with", "EQ", "Starts-With"), fieldName, value).map(([op, f, v]) => [op, `$${f}`, v]) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constantFrom("content-length-range"), fc.integer({ min: -2, max: 50 }), fc.integer({ min: -2, max: 50 })).map((c) => [...c]),
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
);
const expiration = fc.oneof(
  fc.integer({ min: -3600, max: 3600 }).map((s) => new Date(NOW + s * 1000).toISOString()),
  fc.jsonValue({ maxDepth: 1 }),
);
/** A policy document, usually well-formed JSON with a condition per signing field, sometimes anything at all. */
const documentText = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.tuple(expiration, fc.array(condition, { maxLength: 8 }), fc.boolean()).map(([exp, conds, signingOnes]) =>
      JSON.stringify({
        expiration: exp,
        conditions: signingOnes ? [{ "x-amz-algorithm": "AWS4-HMAC-SHA256" }, { "x-amz-credential": CREDENTIAL }, { "x-amz-date": AMZ_DATE }, ...conds] : conds,
      }),
    ),
  },
  { weight: 1, arbitrary: hostileString },
);
const extraFields = fc.dictionary(fieldName, value, { maxKeys: 5 });

const arbitraryForm = fc.record({ doc: documentText, extra: extraFields });
/**
 * A document written for its fields (a condition per field that it meets, the bucket's, the signing
 * fields'), then spoiled or not: a condition dropped, another field's added, a value changed.
 */
const nearlyRightForm = fc
  .tuple(extraFields, expiration, fc.nat(), fc.constantFrom("none", "drop", "add", "change"), fieldName, value)
  .map(([extra, exp, pick, spoil, otherField, otherValue]) => {
    const sent = { "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": CREDENTIAL, "x-amz-date": AMZ_DATE, ...extra, bucket: BUCKET };
    const conditions: unknown[] = Object.entries(sent).map(([f, v], i) => (i % 2 ? { [f]: v } : ["starts-with", `$${f}`, v.slice(0, pick % (v.length + 1))]));
    const at = pick % conditions.length;
    if (spoil === "drop") conditions.splice(at, 1);
    if (spoil === "add") conditions.push(["eq", `$${otherField}`, otherValue]);
    if (spoil === "change") conditions[at] = { [Object.keys(sent)[at]!]: otherValue };
    return { doc: JSON.stringify({ expiration: exp, conditions }), extra };
  });

function signedForm(doc: string, extra: Record<string, string>): Record<string, string> {
  const policy = Buffer.from(doc).toString("base64");
  return { "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": CREDENTIAL, "x-amz-date": AMZ_DATE, ...extra, policy, "x-amz-signature": sign(policy) };
}
const isAuthError = (e: unknown) => e instanceof S3AuthError;
const exempt = (name: string) => ["policy", "x-amz-signature", "file", "key", "content-type"].includes(name) || name.startsWith("x-ignore-");

/** What an acceptance must be consistent with, read from the document independently of the code under test. */
function expectAllowedByDocument(doc: string, fields: Record<string, string>) {
  const parsed = JSON.parse(doc) as { expiration: string; conditions: unknown[] };
  expect(Date.parse(parsed.expiration)).toBeGreaterThanOrEqual(NOW);
  const about = new Map<string, { op: string; value: string }[]>();
  for (const c of parsed.conditions) {
    const list = Array.isArray(c)
      ? String(c[0]).toLowerCase() === "content-length-range"
        ? []
        : [{ field: String(c[1]).slice(1).toLowerCase(), op: String(c[0]).toLowerCase(), value: String(c[2]) }]
      : Object.entries(c as Record<string, string>).map(([field, v]) => ({ field: field.toLowerCase(), op: "eq", value: v }));
    for (const { field, op, value: v } of list) about.set(field, [...(about.get(field) ?? []), { op, value: v }]);
  }
  const sent = { ...fields, bucket: BUCKET };
  for (const [name, v] of Object.entries(sent)) {
    if (exempt(name)) continue;
    const rules = about.get(name);
    expect(rules?.length ?? 0).toBeGreaterThan(0);
    for (const rule of rules ?? []) expect(rule.op === "eq" ? v === rule.value : v.startsWith(rule.value)).toBe(true);
  }
  for (const field of about.keys()) if (field !== "key") expect(field in sent).toBe(true);
}

describe("POST policy verification", () => {
  test("signed arbitrary documents and fields: accepted only as the document allows, otherwise an S3 auth error in Chinese", () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(arbitraryForm, nearlyRightForm), ({ doc, extra }) => {
        const fields = signedForm(doc, extra);
        const verified = expectContained(() => verifyPostPolicy(fields, BUCKET, lookup, NOW), isAuthError);
        if (verified === undefined) return;
        accepted++;
        expectAllowedByDocument(doc, fields);
      }),
      fuzzParams(10),
    );
    // The generators must reach acceptances, or the soundness check above checked nothing.
    expect(accepted).toBeGreaterThan(0);
  });

  test("an accepted form is refused after any one-character change to its policy or signature", () => {
    const conditions = [
      { bucket: BUCKET },
      ["starts-with", "$key", "up/"],
      { "x-amz-algorithm": "AWS4-HMAC-SHA256" },
      { "x-amz-credential": CREDENTIAL },
      { "x-amz-date": AMZ_DATE },
    ];
    const fields = signedForm(JSON.stringify({ expiration: new Date(NOW + 60_000).toISOString(), conditions }), { key: "up/${filename}" });
    expect(verifyPostPolicy(fields, BUCKET, lookup, NOW).accessKeyId).toBe(ACCESS_KEY);
    const base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    fc.assert(
      fc.property(fc.constantFrom("policy", "x-amz-signature"), fc.nat(), fc.constantFrom(...base64, "0", "f"), (name, at, replacement) => {
        const original = fields[name]!;
        const i = at % original.length;
        fc.pre(original[i]!.toLowerCase() !== replacement.toLowerCase());
        const tampered = { ...fields, [name]: original.slice(0, i) + replacement + original.slice(i + 1) };
        expect(() => verifyPostPolicy(tampered, BUCKET, lookup, NOW)).toThrow(S3AuthError);
      }),
      fuzzParams(5),
    );
  });
});
