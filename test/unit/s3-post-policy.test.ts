/**
 * verifyPostPolicy, the browser-form upload's gate (S3 POST Object, SigV4 POST policy), rule by rule:
 * the V2 refusal, the signing fields and their shapes, the signature over the base64 policy, the
 * document's expiry and conditions, and "every field a condition, every condition a field". The
 * signatures here are computed independently of the code under test (node:crypto HMAC chain).
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { S3AuthError } from "../../src/s3/s3-auth-error";
import { type PolicyFields, verifyPostPolicy } from "../../src/s3/post-policy";

const ACCESS_KEY = "KURAPOLICYTEST0001";
const SECRET = "policy-test-secret";
const REGION = "auto";
const DAY = "20261128";
const AMZ_DATE = `${DAY}T120000Z`;
const CREDENTIAL = `${ACCESS_KEY}/${DAY}/${REGION}/s3/aws4_request`;
const NOW = Date.parse("2026-11-28T12:30:00Z");
const EXPIRES = "2026-11-28T13:00:00.000Z";
const BUCKET = "kura";

const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();
function sign(policyB64: string, secret = SECRET, day = DAY, region = REGION) {
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), "s3"), "aws4_request");
  return createHmac("sha256", key).update(policyB64).digest("hex");
}

/** What the signing fields' conditions say, as boto3 writes them. */
const signingConditions = () => [{ "x-amz-algorithm": "AWS4-HMAC-SHA256" }, { "x-amz-credential": CREDENTIAL }, { "x-amz-date": AMZ_DATE }];

/** A form as boto3's generate_presigned_post makes it: `extra` fields sent, `conditions` added to the signing ones. */
function form(opts: { conditions?: unknown; extra?: Record<string, string>; expiration?: unknown; doc?: string; secret?: string } = {}): PolicyFields {
  const conditions = opts.conditions ?? [{ bucket: BUCKET }, ["starts-with", "$key", "uploads/"], ...signingConditions()];
  const doc = opts.doc ?? JSON.stringify({ expiration: "expiration" in opts ? opts.expiration : EXPIRES, conditions });
  const policy = Buffer.from(doc).toString("base64");
  return {
    key: "uploads/${filename}",
    "x-amz-algorithm": "AWS4-HMAC-SHA256",
    "x-amz-credential": CREDENTIAL,
    "x-amz-date": AMZ_DATE,
    policy,
    "x-amz-signature": sign(policy, opts.secret),
    ...opts.extra,
  };
}
const lookup = (id: string) => (id === ACCESS_KEY ? SECRET : undefined);
const verify = (fields: PolicyFields, now = NOW, bucket = BUCKET) => verifyPostPolicy(fields, bucket, lookup, now);
/** `code: message`, or "ok". */
function outcome(run: () => unknown): string {
  try {
    run();
    return "ok";
  } catch (err) {
    if (err instanceof S3AuthError) return `${err.code}: ${err.message}`;
    throw err;
  }
}
const refusal = (fields: PolicyFields, now = NOW) => outcome(() => verify(fields, now));
const denied = (why: string) => `AccessDenied: 表单上传被拒绝：${why}`;

describe("the signing fields", () => {
  test("a boto3-shaped form verifies and says which key signed it, with no size bounds", () => {
    const verified = verify(form());
    expect(verified.accessKeyId).toBe(ACCESS_KEY);
    expect([verified.minSize, verified.maxSize]).toEqual([0, undefined]);
  });

  test("Signature V2 forms are refused as such, whatever else they carry", () => {
    const v2 = "InvalidRequest: 只支持 AWS Signature V4（AWS4-HMAC-SHA256），不支持 Signature V2 的表单上传";
    expect(refusal({ ...form(), awsaccesskeyid: ACCESS_KEY })).toBe(v2);
    const { "x-amz-signature": _, ...unsignedV4 } = form();
    expect(refusal({ ...unsignedV4, signature: "c2lnbmF0dXJl" })).toBe(v2);
    // A field named `signature` next to a V4 signature is just a field (and needs a condition).
    expect(refusal({ ...form(), signature: "x" })).toBe(denied("字段 signature 没有对应的策略条件"));
  });

  test("each of policy, x-amz-signature, x-amz-credential and x-amz-date is required, and empty counts as missing", () => {
    for (const name of ["policy", "x-amz-signature", "x-amz-credential", "x-amz-date"]) {
      const { [name]: _, ...without } = form();
      expect(refusal(without)).toBe(denied("缺少 policy、x-amz-credential、x-amz-date 或 x-amz-signature 字段"));
      expect(refusal({ ...form(), [name]: "" })).toBe(denied("缺少 policy、x-amz-credential、x-amz-date 或 x-amz-signature 字段"));
    }
  });

  test("the algorithm must be given and be AWS4-HMAC-SHA256 exactly", () => {
    const { "x-amz-algorithm": _, ...without } = form();
    expect(refusal(without)).toBe(denied("x-amz-algorithm 必须是 AWS4-HMAC-SHA256"));
    for (const algorithm of ["aws4-hmac-sha256", "AWS4-HMAC-SHA1", " AWS4-HMAC-SHA256"]) {
      expect(refusal({ ...form(), "x-amz-algorithm": algorithm })).toBe(denied("x-amz-algorithm 必须是 AWS4-HMAC-SHA256"));
    }
  });

  test("the credential is key/yyyymmdd/region/s3/aws4_request", () => {
    const malformed = denied("x-amz-credential 格式错误");
    for (const credential of [
      `${ACCESS_KEY}/${DAY}/${REGION}/s3`,
      `${ACCESS_KEY}/${DAY}/${REGION}/s3/aws4_request/x`,
      `${ACCESS_KEY}/${DAY}/${REGION}/s3/aws4_requesT`,
      `${ACCESS_KEY}/${DAY}/${REGION}/sts/aws4_request`,
      `${ACCESS_KEY}/2026112/${REGION}/s3/aws4_request`,
      `${ACCESS_KEY}/202611280/${REGION}/s3/aws4_request`,
      `${ACCESS_KEY}/2026-11-/${REGION}/s3/aws4_request`,
      `${ACCESS_KEY}/x${DAY}/${REGION}/s3/aws4_request`,
    ]) {
      expect(refusal({ ...form(), "x-amz-credential": credential })).toBe(malformed);
    }
  });

  test("x-amz-date is a real basic-format timestamp on the credential's day", () => {
    const bad = denied("x-amz-date 无效或与凭据日期不一致");
    for (const date of ["20261128T120000", "2026-11-28T12:00:00Z", "20261128T250000Z", "20261131T120000Z", "20261129T120000Z"]) {
      expect(refusal({ ...form(), "x-amz-date": date })).toBe(bad);
    }
  });

  test("an unknown access key is InvalidAccessKeyId; a signature by another secret, day or region does not match; case of the hex does not matter", () => {
    expect(refusal({ ...form(), "x-amz-credential": `NOSUCHKEY/${DAY}/${REGION}/s3/aws4_request` })).toBe("InvalidAccessKeyId: 访问密钥 ID 不存在或已被撤销");
    const mismatch = "SignatureDoesNotMatch: 表单上传的签名不匹配，请检查访问密钥和策略";
    expect(refusal(form({ secret: "another-secret" }))).toBe(mismatch);
    const f = form();
    expect(refusal({ ...f, "x-amz-signature": sign(f.policy!, SECRET, "20261127") })).toBe(mismatch);
    expect(refusal({ ...f, "x-amz-signature": sign(f.policy!, SECRET, DAY, "us-east-1") })).toBe(mismatch);
    expect(refusal({ ...f, "x-amz-signature": f["x-amz-signature"]!.slice(0, 63) })).toBe(mismatch);
    expect(refusal({ ...f, "x-amz-signature": f["x-amz-signature"]!.toUpperCase() })).toBe("ok");
    // The signature covers the base64 text itself: the same document encoded otherwise is another policy.
    expect(refusal({ ...f, policy: `${f.policy}\n` })).toBe(mismatch);
  });
});

describe("the policy document", () => {
  test("a signed document that is not base64 JSON, or has no valid expiration, is refused", () => {
    expect(refusal(form({ doc: "not json" }))).toBe(denied("policy 不是 base64 编码的 JSON"));
    // A number is no expiration, even one Date.parse would read as a year.
    for (const expiration of [undefined, 1795000000000, 2099, "someday", null]) {
      expect(refusal(form({ expiration }))).toBe(denied("策略缺少有效的 expiration"));
    }
  });

  test("the policy holds up to its expiration instant, not a millisecond past it", () => {
    const at = Date.parse(EXPIRES);
    expect(refusal(form(), at)).toBe("ok");
    expect(refusal(form(), at + 1)).toBe(denied("策略已过期"));
  });

  test("conditions must be an array of [op, ...] lists or {field: string} objects", () => {
    expect(refusal(form({ conditions: { bucket: BUCKET } }))).toBe(denied("策略缺少 conditions 数组"));
    expect(refusal(form({ doc: JSON.stringify({ expiration: EXPIRES }) }))).toBe(denied("策略缺少 conditions 数组"));
    for (const c of [null, 7, "bucket"]) expect(refusal(form({ conditions: [c] }))).toBe(denied("策略条件格式无效"));
    expect(refusal(form({ conditions: [{ bucket: 1 }] }))).toBe(denied("策略条件 bucket 的值必须是字符串"));
    for (const c of [
      ["eq", "key", "uploads/a.png"],
      ["eq", "$key", 1],
      ["eq", 5, "x"],
      ["starts-with", null, "x"],
      ["in", "$key", "a"],
      ["starts-with", "$key"],
      [],
    ]) {
      expect(refusal(form({ conditions: [c] }))).toBe(denied(`不支持的策略条件 ${JSON.stringify(c).slice(0, 80)}`));
    }
    const long = ["eq", "$key", "x".repeat(200)];
    expect(refusal(form({ conditions: [["nope", ...long.slice(1)]] }))).toBe(
      denied(`不支持的策略条件 ${JSON.stringify(["nope", ...long.slice(1)]).slice(0, 80)}`),
    );
  });

  test("content-length-range gives whole, non-negative, ordered bounds; min = max is allowed", () => {
    const withRange = (min: unknown, max: unknown) =>
      form({ conditions: [{ bucket: BUCKET }, ["starts-with", "$key", ""], ...signingConditions(), ["content-length-range", min, max]] });
    expect([verify(withRange(10, 20)).minSize, verify(withRange(10, 20)).maxSize]).toEqual([10, 20]);
    expect(verify(withRange(0, 0)).maxSize).toBe(0);
    expect(verify(withRange("5", "5")).minSize).toBe(5);
    for (const [min, max] of [
      [-1, 10],
      [11, 10],
      [1.5, 10],
      [1, "ten"],
      [1, null],
    ]) {
      expect(refusal(withRange(min, max))).toBe(denied("content-length-range 无效"));
    }
    // The operator's name is not case-sensitive, as in S3.
    const upper = form({ conditions: [{ bucket: BUCKET }, ["STARTS-WITH", "$KEY", ""], ...signingConditions(), ["Content-Length-Range", 1, 2]] });
    expect(verify(upper).maxSize).toBe(2);
  });
});

describe("every field has a condition, every condition a field", () => {
  test("a field the policy does not mention is refused; the signature fields, the file and x-ignore-* need none", () => {
    expect(refusal({ ...form(), "x-amz-meta-owner": "me" })).toBe(denied("字段 x-amz-meta-owner 没有对应的策略条件"));
    expect(refusal({ ...form(), file: "inline", "x-ignore-anything": "1", "x-ignore-": "" })).toBe("ok");
    // x-amz-algorithm, -credential and -date are not exempt: a policy that does not name them is refused.
    expect(refusal(form({ conditions: [{ bucket: BUCKET }, ["starts-with", "$key", ""]] }))).toBe(denied("字段 x-amz-algorithm 没有对应的策略条件"));
  });

  test("eq means the exact value, starts-with a prefix; every condition on a field must hold", () => {
    const conditions = (...extra: unknown[]) => [{ bucket: BUCKET }, ["starts-with", "$key", ""], ...signingConditions(), ...extra];
    const meta = (value: string, ...extra: unknown[]) => ({ ...form({ conditions: conditions(...extra) }), "x-amz-meta-tag": value });
    expect(refusal(meta("cats", ["eq", "$x-amz-meta-tag", "cats"]))).toBe("ok");
    expect(refusal(meta("cats!", ["eq", "$x-amz-meta-tag", "cats"]))).toBe(denied("字段 x-amz-meta-tag 不满足策略条件"));
    expect(refusal(meta("Cats", { "x-amz-meta-tag": "cats" }))).toBe(denied("字段 x-amz-meta-tag 不满足策略条件"));
    // {field: value} is equality, not a prefix.
    expect(refusal(meta("cats", { "x-amz-meta-tag": "cat" }))).toBe(denied("字段 x-amz-meta-tag 不满足策略条件"));
    expect(refusal(meta("cats-and-dogs", ["starts-with", "$x-amz-meta-tag", "cats"]))).toBe("ok");
    expect(refusal(meta("dogs", ["starts-with", "$x-amz-meta-tag", "cats"]))).toBe(denied("字段 x-amz-meta-tag 不满足策略条件"));
    expect(refusal(meta("anything", ["starts-with", "$x-amz-meta-tag", ""]))).toBe("ok");
    // Two conditions on one field: both apply, not just the first that matches.
    expect(refusal(meta("cats-x", ["starts-with", "$x-amz-meta-tag", "cats"], ["eq", "$x-amz-meta-tag", "cats-y"]))).toBe(
      denied("字段 x-amz-meta-tag 不满足策略条件"),
    );
    // Condition field names are matched without regard to case, like form field names.
    expect(refusal(meta("cats", ["eq", "$X-Amz-Meta-Tag", "cats"]))).toBe("ok");
    expect(refusal(meta("cats", { "X-AMZ-META-TAG": "cats" }))).toBe("ok");
  });

  test("the bucket is the request path's, checked like a field (a form's own bucket field does not replace it)", () => {
    expect(outcome(() => verify(form(), NOW, "photos"))).toBe(denied("字段 bucket 不满足策略条件"));
    expect(outcome(() => verify({ ...form(), bucket: "photos" }, NOW, BUCKET))).toBe("ok");
    expect(outcome(() => verify({ ...form(), bucket: BUCKET }, NOW, "photos"))).toBe(denied("字段 bucket 不满足策略条件"));
    const noBucketCondition = form({ conditions: [["starts-with", "$key", ""], ...signingConditions()] });
    expect(refusal(noBucketCondition)).toBe(denied("字段 bucket 没有对应的策略条件"));
  });

  test("a condition about a field the form did not send is refused, except key (checked once ${filename} is known)", () => {
    const conditions = [{ bucket: BUCKET }, ["starts-with", "$key", ""], ...signingConditions()];
    expect(refusal(form({ conditions: [...conditions, { success_action_status: "201" }] }))).toBe(denied("缺少策略要求的字段 success_action_status"));
    expect(refusal(form({ conditions: [...conditions, ["starts-with", "$content-type", "image/"]] }))).toBe(denied("缺少策略要求的字段 content-type"));
    const { key: _, ...keyless } = form();
    expect(refusal(keyless)).toBe("ok");
    // A range is about the file, never a missing field.
    expect(refusal(form({ conditions: [...conditions, ["content-length-range", 0, 10]] }))).toBe("ok");
  });

  test("key and content-type are left to the caller, who checks their final values against the same conditions", () => {
    const conditions = [{ bucket: BUCKET }, ["starts-with", "$key", "uploads/"], ...signingConditions(), ["starts-with", "$content-type", "image/"]];
    const verified = verify({ ...form({ conditions }), key: "elsewhere/${filename}", "content-type": "text/html" });
    expect(outcome(() => verified.check("key", "uploads/cat.png"))).toBe("ok");
    expect(outcome(() => verified.check("key", "elsewhere/cat.png"))).toBe(denied("字段 key 不满足策略条件"));
    expect(outcome(() => verified.check("content-type", "image/png"))).toBe("ok");
    expect(outcome(() => verified.check("content-type", "text/html"))).toBe(denied("字段 content-type 不满足策略条件"));
    expect(outcome(() => verified.check("x-amz-meta-late", "1"))).toBe(denied("字段 x-amz-meta-late 没有对应的策略条件"));
    // No key condition at all: no key is acceptable.
    const open = verify(form({ conditions: [{ bucket: BUCKET }, ...signingConditions()] }));
    expect(outcome(() => open.check("key", "any.png"))).toBe(denied("字段 key 没有对应的策略条件"));
  });
});
