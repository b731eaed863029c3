/*
 * The tab's title: the page's own name, led by how many tasks wait for a decision, so a
 * background tab says when it needs you: "(2) Tasks · foreman".
 */
let page = "foreman";
let awaiting = 0;

function apply(): void {
  document.title = `${awaiting ? `(${awaiting}) ` : ""}${page}${page === "foreman" ? "" : " · foreman"}`;
}

export function setPageTitle(name: string): void {
  page = name;
  apply();
}

export function setAwaitingCount(n: number): void {
  awaiting = n;
  apply();
}
