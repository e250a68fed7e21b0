// Download buttons for attachments the server builds on request (snapshots, the metadata export,
// rclone configs): a real link (open in a new tab still works), whose plain click fetches the file
// first so an error answer becomes a toast instead of a download the browser drops silently.
import { download } from "./api";
import { errorText, h, toast } from "./dom";

export function downloadLink(label: string, path: string, fileName: string, attrs: Record<string, unknown> = {}): HTMLAnchorElement {
  const { class: cls, ...rest } = attrs;
  const a = h("a", { ...rest, class: `button ${cls ?? ""}`.trim(), href: path, download: fileName }, label);
  let running = false;
  a.addEventListener("click", (e) => {
    // Ctrl/⌘/middle clicks keep the browser's own handling (a new tab).
    if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    if (running) return;
    running = true;
    a.setAttribute("aria-busy", "true");
    a.classList.add("busy");
    download(path, fileName)
      .catch((err) => toast(`下载失败：${errorText(err)}`, "error"))
      .finally(() => {
        running = false;
        a.removeAttribute("aria-busy");
        a.classList.remove("busy");
      });
  });
  return a;
}
