/**
 * The server's approval texts in one language for pure tests: the real locale files and Koishi's
 * own interpolation (`h.parse`), as `ctx.i18n` renders them.
 */
import { koishi } from "../../server/koishi.ts";
import { readLocale, type Locale, type LocaleTree } from "../../server/locales/load.ts";
import { voiceOf, type Voice } from "../../server/approvals/messages.ts";

export function voice(locale: Locale): Voice {
  const tree = readLocale(locale);
  const lookup = (path: string) => {
    const value = path.split(".").reduce<LocaleTree | string | undefined>((node, key) => (typeof node === "object" ? node[key] : undefined), tree);
    if (typeof value !== "string") throw new Error(`${locale}: no text ${path}`);
    return value;
  };
  return voiceOf((path, params) => koishi.h.parse(lookup(path), params));
}
