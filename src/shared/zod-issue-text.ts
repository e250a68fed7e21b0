/**
 * What a failed zod bound asks for, in Chinese ("至少 8 个字符", "不能大于 64", "只能是 strip、passthrough"),
 * so a refusal says what would pass: `字段 new_password 的值无效` left a person guessing that a
 * password needs 8 characters. zod's own messages are English, so they are never shown.
 */
export interface ZodIssueLike {
  path: PropertyKey[];
  code: string;
  message?: string;
  origin?: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  inclusive?: boolean;
  values?: unknown[];
  keys?: string[];
}

const UNIT: Record<string, string> = { string: " 个字符", array: " 项", set: " 项" };

/** The requirement a bound issue states; undefined for any other issue. */
export function issueRequirement(issue: ZodIssueLike): string | undefined {
  const unit = UNIT[issue.origin ?? ""];
  if (issue.code === "too_small" && issue.minimum !== undefined) {
    const n = Number(issue.minimum);
    if (unit) return issue.inclusive === false ? `须多于 ${n}${unit}` : `至少 ${n}${unit}`;
    return issue.inclusive === false ? `须大于 ${n}` : `不能小于 ${n}`;
  }
  if (issue.code === "too_big" && issue.maximum !== undefined) {
    const n = Number(issue.maximum);
    if (unit) return issue.inclusive === false ? `须少于 ${n}${unit}` : `最多 ${n}${unit}`;
    return issue.inclusive === false ? `须小于 ${n}` : `不能大于 ${n}`;
  }
  if (issue.code === "invalid_value" && issue.values?.length) return `只能是 ${issue.values.map(String).join("、")}`;
  if (issue.code === "invalid_type" && (issue as { expected?: string }).expected === "int") return "须为整数";
  return undefined;
}
