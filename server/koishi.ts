/** Koishi's runtime values from its CommonJS build: its ES module entry cannot be imported by Node, and mixing
 * builds would give two copies of cordis. */
import { createRequire } from "node:module";
import type * as KoishiModule from "koishi";

export const koishi = createRequire(import.meta.url)("koishi") as typeof KoishiModule;

/** The database service itself, without the tracing proxy cordis puts around every service a
 * context hands out: through it, every method call builds a shadow context and wraps each property
 * minato reads (a third of an event's ingest CPU went there). The tracing only tells cordis which
 * plugin made a call, which rows written and read need not know. Where cordis has no such proxy the
 * service is returned as it is. */
export function untracedDatabase(ctx: KoishiModule.Context): KoishiModule.Context["database"] {
  const original = Symbol.for("cordis.original");
  let database = ctx.database as unknown as Record<symbol, unknown>;
  // A service handed through a plugin's context is a proxy of the root's proxy: unwrap both.
  for (let inner = database[original]; inner && inner !== database; inner = database[original]) database = inner as Record<symbol, unknown>;
  return database as unknown as KoishiModule.Context["database"];
}
