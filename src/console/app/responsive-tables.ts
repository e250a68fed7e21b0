// On a phone every `.table` becomes a stack of cards (CSS in index.html): each cell then shows
// its column title from `data-label`. Rows arrive asynchronously from many views, so one
// observer labels cells wherever rows are added instead of every view doing it by hand.

function labelRow(row: HTMLTableRowElement): void {
  const table = row.closest("table");
  if (!table?.classList.contains("table")) return;
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent?.trim() ?? "");
  [...row.cells].forEach((cell, i) => {
    if (cell.tagName === "TD" && !cell.dataset.label && heads[i]) cell.dataset.label = heads[i];
  });
}

export function labelTablesIn(root: HTMLElement): void {
  const label = (node: Node) => {
    if (!(node instanceof HTMLElement)) return;
    if (node instanceof HTMLTableRowElement) labelRow(node);
    for (const tr of node.querySelectorAll("tr")) labelRow(tr);
  };
  label(root);
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) label(n);
  }).observe(root, { childList: true, subtree: true });
}
