/**
 * Whether this copy of the page is retired. At every reconnect Koishi's client drops the page's
 * extension and loads it again from a new address (a new copy of these modules), while its theme
 * keeps the old copy's page instance alive but hidden (`<keep-alive>`), its watchers still running.
 * A retired copy asks the server nothing more: without this, each restart left one more hidden
 * page signing in on every reconnect (before this plugin's listener was back: `not implemented`)
 * and reloading its views.
 */
let retired = false;

export function isRetired(): boolean {
  return retired;
}

export function retire(): void {
  retired = true;
}
