import { escapeMarkup } from "../../shared/markup";

/**
 * The page the browser lands on after the provider's consent screen. It only
 * tells the admin what happened; the token stays on the server until the
 * console fetches it from /result, so it never sits in the page, the browser
 * history or a screenshot. The URL carried the authorization code, hence
 * no-referrer and no caching.
 */
export function callbackPage(ok: boolean, detail: string): Response {
  const title = ok ? "授权完成" : "授权失败";
  const hint = ok ? "请回到 Kura 管理后台继续添加或保存存储渠道，此页面可以关闭。" : "请回到 Kura 管理后台重新发起授权。";
  const html = `<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} - Kura</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}p{line-height:1.6}</style>
</head><body><h1>${title}</h1><p>${escapeMarkup(detail)}</p><p>${hint}</p></body></html>
`;
  return new Response(html, {
    status: 200,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    },
  });
}
