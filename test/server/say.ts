/** The plugin's texts in one language, through Koishi's own i18n on a bare app, for pure functions that take a `Say`. */
import { koishi } from "../../server/koishi.ts";
import { defineLocales, instanceSay, LOCALES, type Locale, type Say } from "../../server/locales/load.ts";

const cache = new Map<Locale, Say>();

export function sayIn(locale: Locale): Say {
  let say = cache.get(locale);
  if (!say) {
    const app = new koishi.Context({ i18n: { locales: [locale, ...LOCALES.filter((other) => other !== locale)] } });
    defineLocales(app);
    say = instanceSay(app);
    cache.set(locale, say);
  }
  return say;
}

/** Chinese, the instance language of a Koishi left at its default. */
export const zh = sayIn("zh-CN");
