/**
 * Every way verifySigV4 refuses a request, with its S3 code and Chinese message, and the boundaries of
 * its clock and expiry rules (written to kill the mutants `bun run mutate sigv4` left). Parsing and clock
 * checks run before the signature comparison, so a request with a dummy signature that passes them
 * ends in SignatureDoesNotMatch; fully valid requests are signed with aws4 at a fixed date.
 */
import { describe, expect, test } from "bun:test";
import aws4 from "aws4";
import { MAX_CLOCK_SKEW_MS, MAX_PRESIGNED_EXPIRES_S, S3AuthError, verifySigV4 } from "../../src/s3/sigv4.ts";

const AK = "kura_abcdefghijkl";
const SECRET = "secret-access-key-0123456789";
const DAY = "20260301";
const AMZ = `${DAY}T120000Z`;
const NOW = Date.parse("2026-03-01T12:00:00Z");
const DUMMY = "0".repeat(64);
const CRED = `${AK}/${DAY}/us-east-1/s3/aws4_request`;
const lookupSecret = (id: string) => (id === AK || id === "a/b" ? SECRET : undefined);

function outcome(url: string, headers: [string, string][], now = NOW): string {
  try {
    const auth = verifySigV4({ method: "PUT", url, headers }, { lookupSecret, now });
    return `ok:${auth.payloadMode}:${auth.decodedContentLength ?? "-"}`;
  } catch (err) {
    if (!(err instanceof S3AuthError)) throw err;
    return `${err.code}:${err.message}`;
  }
}

const MISMATCH = "SignatureDoesNotMatch:签名不匹配，请检查访问密钥和签名方式";

describe("header auth refusals", () => {
  const authz = (over: { cred?: string; signed?: string; sig?: string; raw?: string } = {}) =>
    over.raw ??
    `AWS4-HMAC-SHA256 Credential=${over.cred ?? CRED}, SignedHeaders=${over.signed ?? "host;x-amz-content-sha256;x-amz-date"}, Signature=${over.sig ?? DUMMY}`;
  const req = (
    auth: string,
    extra: [string, string][] = [],
    base: [string, string][] = [
      ["x-amz-date", AMZ],
      ["x-amz-content-sha256", "UNSIGNED-PAYLOAD"],
    ],
    now = NOW,
  ) => outcome("/s3/kura/a.jpg", [["host", "kura.test"], ...base, ["authorization", auth], ...extra], now);
  const MALFORMED = "AuthorizationHeaderMalformed:";
  const CRED_SHAPE = `${MALFORMED}签名凭据格式错误，应为 <AccessKeyId>/<日期>/<区域>/s3/aws4_request`;

  test("table", () => {
    const table: [string, string][] = [
      [req(authz()), MISMATCH],
      [req(authz({ raw: "Basic dXNlcjpwYXNz" })), `${MALFORMED}仅支持 AWS4-HMAC-SHA256 签名（AWS Signature Version 4）`],
      [req(authz({ raw: `AWS4-HMAC-SHA256Credential=${CRED}` })), `${MALFORMED}仅支持 AWS4-HMAC-SHA256 签名（AWS Signature Version 4）`],
      [req(authz({ raw: `AWS4-HMAC-SHA256 Credential=${CRED}, SignedHeaders` })), `${MALFORMED}Authorization 头格式错误`],
      [req(authz({ raw: `  AWS4-HMAC-SHA256 Credential=${CRED},SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=${DUMMY}  ` })), MISMATCH],
      [
        req(authz({ raw: `AWS4-HMAC-SHA256 Credential=${CRED}, SignedHeaders=host;x-amz-date` })),
        `${MALFORMED}Authorization 头缺少 Credential、SignedHeaders 或 Signature`,
      ],
      [
        req(authz({ raw: `AWS4-HMAC-SHA256 SignedHeaders=host, Signature=${DUMMY}` })),
        `${MALFORMED}Authorization 头缺少 Credential、SignedHeaders 或 Signature`,
      ],
      [
        req(authz({ raw: `AWS4-HMAC-SHA256 Credential=${CRED}, Signature=${DUMMY}` })),
        `${MALFORMED}Authorization 头缺少 Credential、SignedHeaders 或 Signature`,
      ],
      [req(authz({ cred: `${DAY}/us-east-1/s3/aws4_request` })), CRED_SHAPE],
      [req(authz({ cred: `${AK}/${DAY}/us-east-1/s3/aws4_requestx` })), CRED_SHAPE],
      [req(authz({ cred: `/${DAY}/us-east-1/s3/aws4_request` })), `${MALFORMED}签名凭据格式错误`],
      [req(authz({ cred: `${AK}/2026031/us-east-1/s3/aws4_request` })), `${MALFORMED}签名凭据格式错误`],
      [req(authz({ cred: `${AK}/x${DAY}/us-east-1/s3/aws4_request` })), `${MALFORMED}签名凭据格式错误`],
      [req(authz({ cred: `${AK}/${DAY}x/us-east-1/s3/aws4_request` })), `${MALFORMED}签名凭据格式错误`],
      [req(authz({ cred: `${AK}/${DAY}//s3/aws4_request` })), `${MALFORMED}签名凭据格式错误`],
      [req(authz({ cred: `${AK}/${DAY}/us-east-1/s4/aws4_request` })), `${MALFORMED}签名凭据中的服务名应为 s3，而不是 s4`],
      [req(authz({ cred: `a/b/${DAY}/us-east-1/s3/aws4_request` })), MISMATCH],
      [req(authz({ cred: `nobody/${DAY}/us-east-1/s3/aws4_request` })), "InvalidAccessKeyId:访问密钥 ID 不存在或已被撤销"],
      [req(authz({ cred: `${AK}/20260302/us-east-1/s3/aws4_request` })), `${MALFORMED}签名凭据中的日期与 X-Amz-Date 不一致`],
      [req(authz({ signed: "host;;x-amz-date;x-amz-content-sha256" })), `${MALFORMED}SignedHeaders 格式错误`],
      [req(authz({ signed: "x-amz-date;x-amz-content-sha256" })), `${MALFORMED}SignedHeaders 必须包含 host`],
      [req(authz({ signed: "Host; X-Amz-Date;x-amz-content-sha256" })), MISMATCH],
      [req(authz(), [["x-amz-meta-note", "1"]]), "AccessDenied:请求中存在未签名的头：x-amz-meta-note"],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", "2026"],
            ["x-amz-content-sha256", "UNSIGNED-PAYLOAD"],
          ],
        ),
        "AccessDenied:X-Amz-Date 格式无效",
      ],
      [
        req(
          authz({ signed: "host;x-amz-content-sha256" }),
          [],
          [
            ["date", "Sun, 01 Mar 2026 12:00:00 GMT"],
            ["x-amz-content-sha256", "UNSIGNED-PAYLOAD"],
          ],
        ),
        MISMATCH,
      ],
      [
        req(
          authz({ signed: "host;x-amz-content-sha256" }),
          [],
          [
            ["date", "yesterday-ish"],
            ["x-amz-content-sha256", "UNSIGNED-PAYLOAD"],
          ],
        ),
        "AccessDenied:请求缺少有效的 X-Amz-Date 或 Date 头",
      ],
      [
        req(authz({ signed: "host;x-amz-content-sha256" }), [], [["x-amz-content-sha256", "UNSIGNED-PAYLOAD"]]),
        "AccessDenied:请求缺少有效的 X-Amz-Date 或 Date 头",
      ],
      [req(authz({ signed: "host;x-amz-date" }), [], [["x-amz-date", AMZ]]), "MissingSecurityHeader:请求缺少 x-amz-content-sha256 头"],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "abc"],
          ],
        ),
        "InvalidArgument:x-amz-content-sha256 的值无效或不受支持",
      ],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", `x${"a".repeat(64)}`],
          ],
        ),
        "InvalidArgument:x-amz-content-sha256 的值无效或不受支持",
      ],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", `${"a".repeat(64)}x`],
          ],
        ),
        "InvalidArgument:x-amz-content-sha256 的值无效或不受支持",
      ],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "A".repeat(64)],
          ],
        ),
        MISMATCH,
      ],
      [
        req(
          authz(),
          [],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"],
          ],
        ),
        "MissingContentLength:分块上传缺少有效的 x-amz-decoded-content-length 头",
      ],
      [
        req(
          authz({ signed: "host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length" }),
          [["x-amz-decoded-content-length", "12a"]],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"],
          ],
        ),
        "MissingContentLength:分块上传缺少有效的 x-amz-decoded-content-length 头",
      ],
      [
        req(
          authz({ signed: "host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length" }),
          [["x-amz-decoded-content-length", "a12"]],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"],
          ],
        ),
        "MissingContentLength:分块上传缺少有效的 x-amz-decoded-content-length 头",
      ],
      [
        req(
          authz({ signed: "host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length" }),
          [["x-amz-decoded-content-length", " 12 "]],
          [
            ["x-amz-date", AMZ],
            ["x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"],
          ],
        ),
        MISMATCH,
      ],
      [req(authz(), [], undefined, NOW + MAX_CLOCK_SKEW_MS), MISMATCH],
      [req(authz(), [], undefined, NOW - MAX_CLOCK_SKEW_MS), MISMATCH],
      [req(authz(), [], undefined, NOW + MAX_CLOCK_SKEW_MS + 1), "RequestTimeTooSkewed:请求时间与服务器时间相差超过 15 分钟，请校准客户端时钟"],
      [req(authz(), [], undefined, NOW - MAX_CLOCK_SKEW_MS - 1), "RequestTimeTooSkewed:请求时间与服务器时间相差超过 15 分钟，请校准客户端时钟"],
      [req(authz(), [["authorization", authz()]]), `${MALFORMED}Authorization 头出现了多次`],
    ];
    expect(table.map(([got]) => got)).toEqual(table.map(([, want]) => want));
    expect(MAX_CLOCK_SKEW_MS).toBe(15 * 60 * 1000);
  });

  test("neither or both ways of signing", () => {
    expect(outcome("/s3/kura/a.jpg", [["host", "kura.test"]])).toBe("AccessDenied:请求未签名，拒绝匿名访问");
    expect(
      outcome(`/s3/kura/a.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256`, [
        ["host", "kura.test"],
        ["authorization", authz()],
      ]),
    ).toBe("InvalidArgument:只能使用一种认证方式：Authorization 头或预签名查询参数");
  });
});

describe("presigned refusals and boundaries", () => {
  const q = (over: Record<string, string | null> = {}) => {
    const params: Record<string, string | null> = {
      "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
      "X-Amz-Credential": CRED,
      "X-Amz-Date": AMZ,
      "X-Amz-Expires": "3600",
      "X-Amz-SignedHeaders": "host",
      "X-Amz-Signature": DUMMY,
      ...over,
    };
    return Object.entries(params)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `${k}=${encodeURIComponent(v!)}`)
      .join("&");
  };
  const pre = (over: Record<string, string | null> = {}, now = NOW, extra: [string, string][] = []) =>
    outcome(`/s3/kura/a.jpg?${q(over)}`, [["host", "kura.test"], ...extra], now);
  const CODE = "AuthorizationQueryParametersError:";
  const MISSING = `${CODE}预签名链接缺少 X-Amz-Credential、X-Amz-Date、X-Amz-Expires、X-Amz-SignedHeaders 或 X-Amz-Signature`;
  const EXPIRES = `${CODE}X-Amz-Expires 必须在 1 到 ${MAX_PRESIGNED_EXPIRES_S} 秒之间`;

  test("table", () => {
    const table: [string, string][] = [
      [pre(), MISMATCH],
      [pre({ "X-Amz-Algorithm": "AWS4-HMAC-SHA1" }), `${CODE}X-Amz-Algorithm 必须为 AWS4-HMAC-SHA256`],
      ...["X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"].map((k): [string, string] => [
        pre({ [k]: null }),
        MISSING,
      ]),
      [pre({ "X-Amz-Credential": `${AK}/${DAY}/us-east-1/s3` }), `${CODE}签名凭据格式错误，应为 <AccessKeyId>/<日期>/<区域>/s3/aws4_request`],
      [pre({ "X-Amz-Date": "20260301" }), `${CODE}X-Amz-Date 格式无效`],
      [pre({ "X-Amz-Date": "20260302T120000Z" }), `${CODE}签名凭据中的日期与 X-Amz-Date 不一致`],
      [pre({ "X-Amz-Expires": "0" }), EXPIRES],
      [pre({ "X-Amz-Expires": String(MAX_PRESIGNED_EXPIRES_S + 1) }), EXPIRES],
      [pre({ "X-Amz-Expires": "12345678" }), EXPIRES],
      [pre({ "X-Amz-Expires": "x60" }), EXPIRES],
      [pre({ "X-Amz-Expires": "60x" }), EXPIRES],
      [pre({ "X-Amz-Expires": "1" }), MISMATCH],
      [pre({ "X-Amz-Expires": String(MAX_PRESIGNED_EXPIRES_S) }, NOW + MAX_PRESIGNED_EXPIRES_S * 1000), MISMATCH],
      [pre({ "X-Amz-Expires": "60" }, NOW + 60_000), MISMATCH],
      [pre({ "X-Amz-Expires": "60" }, NOW + 60_001), "AccessDenied:预签名链接已过期"],
      [pre({}, NOW - MAX_CLOCK_SKEW_MS), MISMATCH],
      [pre({}, NOW - MAX_CLOCK_SKEW_MS - 1), "AccessDenied:预签名链接尚未生效（签名时间晚于服务器时间）"],
      [pre({ "X-Amz-SignedHeaders": "x-amz-date" }), `${CODE}SignedHeaders 必须包含 host`],
      [pre({ "X-Amz-Content-Sha256": "nope" }), "InvalidArgument:x-amz-content-sha256 的值无效或不受支持"],
      [
        pre({ "X-Amz-SignedHeaders": "host;x-amz-content-sha256" }, NOW, [["x-amz-content-sha256", "nope"]]),
        "InvalidArgument:x-amz-content-sha256 的值无效或不受支持",
      ],
      [
        pre({ "X-Amz-SignedHeaders": "host;x-amz-content-sha256", "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD" }, NOW, [["x-amz-content-sha256", "nope"]]),
        MISMATCH,
      ],
    ];
    expect(table.map(([got]) => got)).toEqual(table.map(([, want]) => want));
    expect(MAX_PRESIGNED_EXPIRES_S).toBe(7 * 24 * 3600);
  });
});

describe("valid signatures over each request-target form", () => {
  const signed = (path: string, headers: Record<string, string> = {}) =>
    aws4.sign(
      {
        host: "kura.test",
        path,
        method: "PUT",
        service: "s3",
        region: "us-east-1",
        headers: { "X-Amz-Date": AMZ, "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD", ...headers },
        body: "",
      },
      { accessKeyId: AK, secretAccessKey: SECRET },
    ).headers as Record<string, string>;
  const verify = (url: string, headers: Record<string, string>) =>
    outcome(
      url,
      Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)] as [string, string]),
    );

  test("origin form, absolute form, bare origin and fragments verify the same signature", () => {
    const h = signed("/s3/kura/a.jpg?x-id=PutObject");
    expect(verify("/s3/kura/a.jpg?x-id=PutObject", h)).toBe("ok:UNSIGNED-PAYLOAD:-");
    expect(verify("http://kura.test/s3/kura/a.jpg?x-id=PutObject", h)).toBe("ok:UNSIGNED-PAYLOAD:-");
    expect(verify("http://kura.test/s3/kura/a.jpg?x-id=PutObject#frag", h)).toBe("ok:UNSIGNED-PAYLOAD:-");
    expect(verify("/s3/kura/a.jpg?x-id=PutObjectX", h)).toBe(MISMATCH);
    expect(verify("/s3/kura/b.jpg?x-id=PutObject", h)).toBe(MISMATCH);
    const root = signed("/");
    expect(verify("http://kura.test", root)).toBe("ok:UNSIGNED-PAYLOAD:-");
    expect(verify("/", root)).toBe("ok:UNSIGNED-PAYLOAD:-");
    expect(verify("/#x", root)).toBe("ok:UNSIGNED-PAYLOAD:-");
  });

  test("streaming uploads report the decoded length", () => {
    const h = signed("/s3/kura/c.jpg", { "X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "X-Amz-Decoded-Content-Length": "1234" });
    expect(verify("/s3/kura/c.jpg", h)).toBe("ok:STREAMING-UNSIGNED-PAYLOAD-TRAILER:1234");
  });
});
