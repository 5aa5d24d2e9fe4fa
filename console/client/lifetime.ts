/** Whether this copy of the page is retired: Koishi's client reloads the page's modules at every
 * reconnect while `<keep-alive>` keeps the old copy alive, and a retired copy must ask the server nothing. */
let retired = false;

export function isRetired(): boolean {
  return retired;
}

export function retire(): void {
  retired = true;
}
