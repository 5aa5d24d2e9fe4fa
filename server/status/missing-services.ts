/** The one log line when `server` or `database` is missing, naming a loaded driver's own start error. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { instanceText } from "../locales/load.ts";

type ScopeLike = { error?: unknown; runtime: { name?: string } };

function failedPlugins(ctx: Context): { name: string; error: string }[] {
  const failed: { name: string; error: string }[] = [];
  for (const runtime of ctx.registry.values() as Iterable<ScopeLike & { children: ScopeLike[] }>) {
    for (const scope of [runtime, ...runtime.children]) {
      if (scope.error != null) failed.push({ name: scope.runtime.name ?? "?", error: errorText(scope.error) });
    }
  }
  return failed;
}

/** What is missing, and for each the real cause when a plugin failed, else what to install. Pure but for `say`. */
export function missingServicesText(ctx: Context, names: readonly string[]): string {
  const say = (path: string, params: object = {}) => instanceText(ctx, path, params);
  const failed = failedPlugins(ctx);
  const causes =
    failed.length > 0 ? failed.map((plugin) => say("anon-notify.services.failed", plugin)) : names.map((name) => say(`anon-notify.services.${name}`));
  return [say("anon-notify.services.missing", { names: names.join(", ") }), ...causes].join(" ");
}
