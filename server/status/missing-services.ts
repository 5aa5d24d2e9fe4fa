/** The one log line when `server` or `database` is missing, naming a loaded driver's own start error. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { instanceText } from "../locales/load.ts";

type ScopeLike = { error?: unknown; runtime: { name?: string } };

/** What is missing, and for each the real cause when a plugin failed, else what to install. Pure but for `say`. */
export function missingServicesText(ctx: Context, names: readonly string[]): string {
  const say = (path: string, params: object = {}) => instanceText(ctx, path, params);
  // Plugins loaded in this app whose start failed, with why.
  const failed = [...(ctx.registry.values() as Iterable<ScopeLike & { children: ScopeLike[] }>)]
    .flatMap((runtime) => [runtime, ...runtime.children])
    .filter((scope) => scope.error != null)
    .map((scope) => ({ name: scope.runtime.name ?? "?", error: errorText(scope.error) }));
  const causes =
    failed.length > 0 ? failed.map((plugin) => say("anon-notify.services.failed", plugin)) : names.map((name) => say(`anon-notify.services.${name}`));
  return [say("anon-notify.services.missing", { names: names.join(", ") }), ...causes].join(" ");
}
