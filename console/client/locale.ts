/** The page's language: under `npm start` the server's (named in the page's head), for the whole console; else the
 * console's setting, which a non-Chinese browser switches to English once, on the first visit (it stores Chinese). */
import { type Context, useConfig } from "@koishijs/client";
import { watchEffect } from "vue";

export type PageLocale = "zh-CN" | "en-US";
const SEEDED_KEY = "anon-notify.locale-seeded";

export function browserLocale(languages: readonly string[]): PageLocale {
  const first = languages.find((language) => /^(zh|en)\b/i.test(language));
  return first && /^en/i.test(first) ? "en-US" : first ? "zh-CN" : "en-US";
}

/** The language `npm start` runs in, from the meta tag it puts in the console's head. */
export function serverLocale(): PageLocale | undefined {
  const named = document.querySelector('meta[name="anon-notify-language"]')?.getAttribute("content");
  return named === "zh-CN" || named === "en-US" ? named : undefined;
}

export function seedLocale(): void {
  const server = serverLocale();
  if (server) useConfig(true).value.locale = server;
  if (server || localStorage.getItem(SEEDED_KEY)) return;
  localStorage.setItem(SEEDED_KEY, "1");
  const config = useConfig(true);
  if (config.value.locale === "zh-CN" && browserLocale(navigator.languages ?? [navigator.language]) === "en-US") config.value.locale = "en-US";
}

export function pageLocale(): PageLocale {
  return useConfig().value.locale === "en-US" ? "en-US" : "zh-CN";
}

/** `<html lang>` names the console's language as it changes. */
export function followLocale(ctx: Context): void {
  ctx.effect(() => watchEffect(() => (document.documentElement.lang = pageLocale())));
}
