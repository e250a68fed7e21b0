/**
 * Errors shown to admins (channel `last_error`, probe results). They are built
 * from the method, the status and the object path only — never from headers or
 * the server's free text — so neither the password nor a token can leak.
 */
export class WebdavRequestError extends Error {
  constructor(
    readonly method: string,
    readonly status: number,
    target: string,
  ) {
    const hint = HINTS[status] ?? (status >= 500 ? "服务器内部错误" : "");
    super(`WebDAV 请求失败: ${method} ${target}: HTTP ${status}${hint ? ` (${hint})` : ""}`);
    this.name = "WebdavRequestError";
  }
}

const HINTS: Record<number, string> = {
  301: "服务器要求重定向，请检查 url",
  302: "服务器要求重定向，请检查 url",
  303: "服务器要求重定向，请检查 url",
  307: "服务器要求重定向，请检查 url",
  308: "服务器要求重定向，请检查 url",
  400: "请求无效",
  401: "认证失败，请检查 user/pass 或 bearer_token",
  403: "拒绝访问，请检查账号权限",
  404: "路径不存在",
  405: "服务器不允许该方法，url 可能不是 WebDAV 地址",
  409: "上级目录不存在或冲突",
  413: "文件超过服务器允许的大小",
  416: "请求的范围无效",
  423: "资源被锁定",
  429: "请求过于频繁",
  501: "服务器不支持该方法，url 可能不是 WebDAV 地址",
  507: "服务器存储空间不足",
};
