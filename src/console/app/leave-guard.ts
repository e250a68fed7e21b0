// One place that knows whether the current page holds unsaved edits: tab switches ask it
// before leaving, and so does closing or reloading the browser tab.

let guard: (() => boolean) | null = null;

export const UNSAVED_MESSAGE = "有尚未保存的修改，确定离开吗？离开后这些修改会丢失。";

/** A page with a form registers `isDirty`; the shell clears it when the page is left. */
export function setLeaveGuard(isDirty: (() => boolean) | null): void {
  guard = isDirty;
}

/** True when leaving is fine: nothing unsaved, or the person confirmed. */
export function confirmLeave(): boolean {
  if (!guard?.()) return true;
  return confirm(UNSAVED_MESSAGE);
}

window.addEventListener("beforeunload", (e) => {
  if (guard?.()) e.preventDefault();
});
