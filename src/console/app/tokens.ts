// Upload tokens: issue (plaintext shown once, with PicGo / ShareX snippets), revoke,
// rotate, delete, and the derived S3 credential.
import { api, query } from "./api";
import { badge, busy, copyField, errorText, fmtTime, h, openModal, parseUtc, replace, toast } from "./dom";
import { clientSnippets, picgoS3Snippet } from "./snippets";
import type { Page, S3Credential, Token, TokenIssued, User, ViewContext } from "./types";
import { dataTable, hashParams, messageRow, renderPager } from "./ui";

function tokenState(t: Token): "active" | "revoked" | "expired" {
  if (t.revoked_at) return "revoked";
  if (t.expires_at && parseUtc(t.expires_at).getTime() <= Date.now()) return "expired";
  return "active";
}

const STATE_BADGE = {
  active: () => badge("有效", "ok"),
  revoked: () => badge("已吊销", "bad"),
  expired: () => badge("已过期", "muted"),
};

/** The plaintext exists only in this response: show it with ready-to-paste client configs. */
export function showIssued(ctx: ViewContext, issued: TokenIssued, title: string): void {
  const snippets = clientSnippets(ctx.origin, issued.token);
  const sxcu = new Blob([snippets.sharex], { type: "application/json" });
  const download = h("a", { href: URL.createObjectURL(sxcu), download: "Kura.sxcu", class: "button small" }, "下载 Kura.sxcu");
  const modal = openModal(
    title,
    h("p", { class: "notice" }, "令牌明文只显示这一次，关闭后无法再次查看。请立即复制保存。"),
    copyField("令牌", issued.token, { name: "token" }),
    h("h3", null, "PicGo（web-uploader 插件）"),
    h("p", { class: "muted" }, "先执行 picgo install web-uploader，再把下面内容合并进 ~/.picgo/config.json。"),
    copyField("config.json", snippets.picgo, { multiline: true, name: "picgo" }),
    h("h3", null, "ShareX 自定义上传器"),
    copyField("Kura.sxcu", snippets.sharex, { multiline: true, name: "sharex" }),
    h("div", { class: "actions" }, download),
    h("h3", null, "PicGo / PicList（兰空图床 Lsky Pro V2）"),
    h("p", { class: "muted" }, "PicGo：picgo install lankong 后合并进 config.json；PicList 内置的兰空图床填同样的服务器与 Token，版本选 V2。"),
    copyField("config.json", snippets.lankong, { multiline: true, name: "lankong" }),
    h("h3", null, "ShareX 内置 Chevereto 上传器"),
    copyField("设置", snippets.chevereto, { multiline: true, name: "chevereto" }),
    h("h3", null, "curl"),
    copyField("命令", snippets.curl, { name: "curl" }),
  );
  modal.dialog.classList.add("wide");
  modal.dialog.id = "token-issued";
  modal.dialog.addEventListener("close", () => URL.revokeObjectURL(download.href));
}

function showS3(cred: S3Credential, name: string): void {
  const modal = openModal(
    `S3 凭据 · ${name}`,
    h(
      "p",
      { class: "muted" },
      "供 S3 兼容上传接口（/s3/）使用的凭据：rclone 选 provider = Other 并开启 force_path_style；PicGo（picgo-plugin-s3）用下方配置（开启 pathStyleAccess，图片地址由 outputURLPattern 生成，不要用已废弃的 urlPrefix：键中含 #、? 或 % 时它给出的地址打不开）。对象键即图片地址 <图片地址前缀><键>；S3 上传不应用 EXIF 策略。令牌吊销或轮换后凭据随即失效。",
    ),
    copyField("Access Key ID", cred.access_key_id),
    copyField("Secret Access Key", cred.secret_access_key, { name: "secret_access_key" }),
    // Chinese first, the S3 term in brackets: it is the name the client's own form uses.
    copyField("端点（Endpoint）", cred.endpoint, { name: "endpoint" }),
    copyField("区域（Region）", cred.region, { name: "region" }),
    copyField("存储桶（Bucket）", cred.bucket, { name: "bucket" }),
    copyField("图片地址前缀", cred.url_prefix),
    h("h3", null, "PicGo（picgo-plugin-s3）"),
    h("p", { class: "muted" }, "先执行 picgo install s3，再把下面内容合并进 ~/.picgo/config.json；uploadPath 可按需修改。"),
    copyField("config.json", picgoS3Snippet(cred), { multiline: true, name: "picgo-s3" }),
  );
  modal.dialog.classList.add("wide");
  modal.dialog.id = "s3-credential";
}

const PAGE_SIZE = 50;

/**
 * The caller's tokens, paged with the list's total. Admins pick any user (spec 4.6: an admin lists a
 * chosen user's tokens and may revoke or delete them; issuing, rotating and S3 credentials stay the
 * owner's own), also reached from the users page as #tokens?user=<id>.
 */
export function tokensView(ctx: ViewContext): HTMLElement {
  const isAdmin = ctx.me.user.role === "admin";
  const { table, tbody } = dataTable("token-table", ["名称", "前缀", "状态", "签发时间", "过期时间", "最近使用", ""]);
  const pager = h("div", { class: "pager", id: "token-pager" });
  const count = h("span", { class: "muted", id: "token-count" });
  const base = `/api/admin/tokens`;
  let page = 1;
  let owner = (isAdmin && hashParams().get("user")) || ctx.me.user.id;
  const own = () => owner === ctx.me.user.id;

  const row = (t: Token): HTMLElement => {
    const state = tokenState(t);
    const path = `${base}/${t.id}`;
    const actions = h("td", { class: "row-actions" });
    const act = (label: string, run: (b: HTMLButtonElement) => Promise<void>, cls = "small") => {
      const b = h("button", { type: "button", class: cls }, label);
      b.addEventListener("click", () => void busy(b, () => run(b)));
      actions.append(b);
    };
    if (state === "active") {
      // The server keeps rotation and S3 credentials to the token's owner (404 for anyone else).
      if (own()) {
        act("S3 凭据", async () => showS3(await api<S3Credential>("POST", `${path}/s3-credential`), t.name));
        act("轮换", async () => {
          if (!confirm(`轮换“${t.name}”会生成新明文，旧明文和旧 S3 凭据立即失效。继续？`)) return;
          showIssued(ctx, await api<TokenIssued>("POST", `${path}/rotate`), `已轮换：${t.name}`);
          await load();
        });
      }
      act(
        "吊销",
        async () => {
          if (!confirm(`吊销“${t.name}”？使用它的客户端将无法再上传。`)) return;
          await api("POST", `${path}/revoke`);
          toast("已吊销");
          await load();
        },
        "small danger",
      );
    } else {
      act(
        "删除",
        async () => {
          if (!confirm(`删除令牌“${t.name}”的记录？`)) return;
          await api("DELETE", path);
          toast("已删除");
          await load();
        },
        "small danger",
      );
    }
    return h(
      "tr",
      { dataset: { name: t.name, id: String(t.id) } },
      h("td", null, t.name),
      h("td", null, h("code", null, t.prefix)),
      h("td", null, STATE_BADGE[state]()),
      h("td", null, fmtTime(t.created_at)),
      h("td", null, fmtTime(t.expires_at, "永久")),
      h("td", null, fmtTime(t.last_used_at, "从未")),
      actions,
    );
  };

  async function load(): Promise<void> {
    try {
      const data = await api<Page<Token>>("GET", `${base}${query({ page, page_size: PAGE_SIZE, user_id: own() ? undefined : owner })}`);
      const pages = Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      // A revoke or delete on the last page can leave it empty: show the new last page.
      if (page > pages) {
        page = pages;
        return load();
      }
      count.textContent = `共 ${data.total} 个`;
      replace(tbody, ...(data.items.length ? data.items.map(row) : [messageRow(7, own() ? "还没有上传令牌" : "该用户没有上传令牌")]));
      renderPager(pager, page, pages, (p) => {
        page = p;
        void load();
      });
    } catch (err) {
      replace(tbody, messageRow(7, `加载失败：${errorText(err)}`, "error"));
    }
  }

  const name = h("input", { name: "token_name", "aria-label": "令牌用途名称", placeholder: "用途，如 PicGo-笔记本", required: true, maxLength: 64 });
  const hours = h("input", { type: "number", name: "expires_in_hours", min: 0, max: 876000, step: 1, placeholder: "永久", class: "narrow" });
  const submit = h("button", { type: "submit", class: "primary" }, "签发令牌");
  const form = h("form", { class: "inline", id: "token-form" }, name, h("label", null, "有效期（小时）", hours), submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body: Record<string, unknown> = { name: name.value.trim() };
    if (hours.value.trim() !== "") body.expires_in_hours = Number(hours.value);
    void busy(submit, async () => {
      const issued = await api<TokenIssued>("POST", base, body);
      form.reset();
      showIssued(ctx, issued, `已签发：${issued.name}`);
      page = 1;
      await load();
    });
  });
  const otherNote = h(
    "p",
    { class: "notice", id: "token-other-user", hidden: true },
    "正在查看其他用户的令牌：可以吊销或删除，签发、轮换和 S3 凭据只能由令牌所有者操作。",
  );

  const userSelect = h("select", { name: "token_user", "aria-label": "令牌所属用户" }, h("option", { value: ctx.me.user.id }, `${ctx.me.user.name}（我）`));
  const showOwner = () => {
    form.hidden = !own();
    otherNote.hidden = own();
  };
  if (isAdmin) {
    userSelect.addEventListener("change", () => {
      owner = userSelect.value;
      page = 1;
      showOwner();
      void load();
    });
    api<Page<User>>("GET", "/api/admin/users").then(
      (users) => {
        for (const u of users.items) if (u.id !== ctx.me.user.id) userSelect.append(h("option", { value: u.id }, u.name));
        userSelect.value = owner;
      },
      // Without the list the page still shows the chosen user's tokens.
      () => undefined,
    );
  }
  showOwner();
  void load();
  return h(
    "section",
    { class: "view" },
    h("div", { class: "toolbar" }, h("h1", null, "上传令牌"), count),
    h("p", { class: "muted" }, "令牌用于 PicGo、ShareX、curl 和 S3 客户端上传（Authorization: Bearer <令牌>）。"),
    isAdmin ? h("label", { class: "field" }, h("span", null, "所属用户"), userSelect) : null,
    otherNote,
    form,
    h("div", { class: "table-wrap" }, table),
    pager,
  );
}
