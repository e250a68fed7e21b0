/**
 * Browser-form uploads (S3 POST Object with a SigV4 POST policy, what boto3's
 * `generate_presigned_post` and the SDK's `createPresignedPost` produce). Pure: given the form fields
 * (everything before the file) and a secret lookup, checks the signature over the base64 policy, the
 * policy's expiry, and that every field satisfies a condition and every condition is met.
 */
import { S3AuthError } from "./s3-auth-error";
import { deriveSigningKey, parseAmzDate, signaturesEqual, signHex } from "./sigv4-canonical";

/** S3's limit on the policy document. */
export const MAX_POLICY_BYTES = 20 * 1024;

export interface PolicyFields {
  /** Lower-cased field names → values (form field names are case-insensitive in S3). */
  [name: string]: string;
}

export interface VerifiedPolicy {
  accessKeyId: string;
  /** Inclusive object size bounds from `content-length-range` (undefined = no bound). */
  minSize: number;
  maxSize: number | undefined;
  /** Checks a field whose value is only known later (`key` after `${filename}`, `content-type`). */
  check: (name: string, value: string) => void;
}

type Condition = { kind: "eq" | "starts-with"; field: string; value: string } | { kind: "range"; min: number; max: number };

const denied = (why: string) => new S3AuthError("AccessDenied", `表单上传被拒绝：${why}`);

/** Fields that need no condition (S3: the signature fields themselves, the file, `x-ignore-*`). */
function exempt(name: string): boolean {
  return name === "policy" || name === "x-amz-signature" || name === "file" || name.startsWith("x-ignore-");
}

function parseConditions(raw: unknown): Condition[] {
  if (!Array.isArray(raw)) throw denied("策略缺少 conditions 数组");
  const out: Condition[] = [];
  for (const c of raw) {
    if (Array.isArray(c)) {
      const op = String(c[0]).toLowerCase();
      if (op === "content-length-range") {
        const [min, max] = [Number(c[1]), Number(c[2])];
        if (!Number.isInteger(min) || !Number.isInteger(max) || min < 0 || max < min) throw denied("content-length-range 无效");
        out.push({ kind: "range", min, max });
      } else if ((op === "eq" || op === "starts-with") && typeof c[1] === "string" && typeof c[2] === "string" && c[1].startsWith("$")) {
        out.push({ kind: op, field: c[1].slice(1).toLowerCase(), value: c[2] });
      } else throw denied(`不支持的策略条件 ${JSON.stringify(c).slice(0, 80)}`);
    } else if (c && typeof c === "object") {
      for (const [field, value] of Object.entries(c as Record<string, unknown>)) {
        if (typeof value !== "string") throw denied(`策略条件 ${field} 的值必须是字符串`);
        out.push({ kind: "eq", field: field.toLowerCase(), value });
      }
    } else throw denied("策略条件格式无效");
  }
  return out;
}

/**
 * Verifies the policy of a form (`bucket` is the bucket of the request path, checked against a
 * `bucket` condition like a field). Throws S3AuthError; returns what the upload still has to honour.
 */
export function verifyPostPolicy(
  fields: PolicyFields,
  bucket: string,
  lookupSecret: (accessKeyId: string) => string | undefined,
  now = Date.now(),
): VerifiedPolicy {
  if (fields.awsaccesskeyid !== undefined || (fields.signature !== undefined && fields["x-amz-signature"] === undefined)) {
    throw new S3AuthError("InvalidRequest", "只支持 AWS Signature V4（AWS4-HMAC-SHA256），不支持 Signature V2 的表单上传");
  }
  const policy = fields.policy;
  const signature = fields["x-amz-signature"];
  const credential = fields["x-amz-credential"];
  const amzDate = fields["x-amz-date"];
  if (!policy || !signature || !credential || !amzDate) throw denied("缺少 policy、x-amz-credential、x-amz-date 或 x-amz-signature 字段");
  if ((fields["x-amz-algorithm"] ?? "") !== "AWS4-HMAC-SHA256") throw denied("x-amz-algorithm 必须是 AWS4-HMAC-SHA256");
  const parts = credential.split("/");
  if (parts.length !== 5 || parts[4] !== "aws4_request" || parts[3] !== "s3" || !/^\d{8}$/.test(parts[1]!)) throw denied("x-amz-credential 格式错误");
  const [accessKeyId, date, region] = parts as [string, string, string, string, string];
  if (parseAmzDate(amzDate) === undefined || amzDate.slice(0, 8) !== date) throw denied("x-amz-date 无效或与凭据日期不一致");

  const secret = lookupSecret(accessKeyId);
  if (secret === undefined) throw new S3AuthError("InvalidAccessKeyId", "访问密钥 ID 不存在或已被撤销");
  const expected = signHex(deriveSigningKey(secret, date, region, "s3"), policy);
  if (!signaturesEqual(expected, signature)) throw new S3AuthError("SignatureDoesNotMatch", "表单上传的签名不匹配，请检查访问密钥和策略");

  let doc: { expiration?: unknown; conditions?: unknown };
  try {
    doc = JSON.parse(Buffer.from(policy, "base64").toString("utf8")) as typeof doc;
  } catch {
    throw denied("policy 不是 base64 编码的 JSON");
  }
  const expires = typeof doc.expiration === "string" ? Date.parse(doc.expiration) : NaN;
  if (!Number.isFinite(expires)) throw denied("策略缺少有效的 expiration");
  if (now > expires) throw denied("策略已过期");
  const conditions = parseConditions(doc.conditions);

  const check = (name: string, value: string) => {
    const applicable = conditions.filter((c) => c.kind !== "range" && c.field === name) as Extract<Condition, { field: string }>[];
    if (applicable.length === 0) throw denied(`字段 ${name} 没有对应的策略条件`);
    for (const c of applicable) {
      if (c.kind === "eq" ? value !== c.value : !value.startsWith(c.value)) throw denied(`字段 ${name} 不满足策略条件`);
    }
  };
  const all: PolicyFields = { ...fields, bucket };
  for (const [name, value] of Object.entries(all)) {
    // `key` and `content-type` may change later (`${filename}`), the caller checks them with the final value.
    if (exempt(name) || name === "key" || name === "content-type") continue;
    check(name, value);
  }
  // Every condition must be about a field that was sent.
  for (const c of conditions) {
    if (c.kind !== "range" && !(c.field in all) && c.field !== "key") throw denied(`缺少策略要求的字段 ${c.field}`);
  }
  const range = conditions.find((c) => c.kind === "range") as Extract<Condition, { kind: "range" }> | undefined;
  return { accessKeyId, minSize: range?.min ?? 0, maxSize: range?.max, check };
}
