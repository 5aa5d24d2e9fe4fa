/** The page's language: the console's locale setting, else the browser's. The console stores Chinese
 * from its first start, so a non-Chinese browser switches it to English once, on the first visit. */
import { useConfig } from "@koishijs/client";

export type PageLocale = "zh-CN" | "en-US";
const SEEDED_KEY = "anon-notify.locale-seeded";

/** The locale a browser's languages ask for. Pure. */
export function browserLocale(languages: readonly string[]): PageLocale {
  const first = languages.find((language) => /^(zh|en)\b/i.test(language));
  return first && /^en/i.test(first) ? "en-US" : first ? "zh-CN" : "en-US";
}

export function seedLocale(): void {
  if (localStorage.getItem(SEEDED_KEY)) return;
  localStorage.setItem(SEEDED_KEY, "1");
  const config = useConfig(true);
  if (config.value.locale === "zh-CN" && browserLocale(navigator.languages ?? [navigator.language]) === "en-US") config.value.locale = "en-US";
}

export function pageLocale(): PageLocale {
  return useConfig().value.locale === "en-US" ? "en-US" : "zh-CN";
}
