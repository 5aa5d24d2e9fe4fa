/** The page's entry. Its language: under `npm start` the server's (named in the page's head), for the whole console;
 * else the console's setting, which a non-Chinese browser switches to English once, on the first visit (it stores Chinese). */
import { type Context, useConfig } from "@koishijs/client";
import { watchEffect } from "vue";
// Before the page, so the parts' own rules come later and refine the shared look.
import "./common.scss";
import { retire } from "./call.ts";
import messages from "./messages.ts";
import Page from "./page.vue";

type PageLocale = "zh-CN" | "en-US";
const SEEDED_KEY = "anon-notify.locale-seeded";

function browserLocale(languages: readonly string[]): PageLocale {
  const first = languages.find((language) => /^(zh|en)\b/i.test(language));
  return first && /^en/i.test(first) ? "en-US" : first ? "zh-CN" : "en-US";
}

/** The language `npm start` runs in, from the meta tag it puts in the console's head. */
function serverLocale(): PageLocale | undefined {
  const named = document.querySelector('meta[name="anon-notify-language"]')?.getAttribute("content");
  return named === "zh-CN" || named === "en-US" ? named : undefined;
}

function seedLocale(): void {
  const server = serverLocale();
  if (server) useConfig(true).value.locale = server;
  if (server || localStorage.getItem(SEEDED_KEY)) return;
  localStorage.setItem(SEEDED_KEY, "1");
  const config = useConfig(true);
  if (config.value.locale === "zh-CN" && browserLocale(navigator.languages ?? [navigator.language]) === "en-US") config.value.locale = "en-US";
}

const pageLocale = (): PageLocale => (useConfig().value.locale === "en-US" ? "en-US" : "zh-CN");

export default (ctx: Context) => {
  // Koishi's client drops this copy at a reconnect and loads a new one; this copy then stays quiet.
  ctx.on("dispose", retire);
  seedLocale();
  // `<html lang>` names the console's language as it changes.
  ctx.effect(() => watchEffect(() => (document.documentElement.lang = pageLocale())));
  // Under npm start the console is this page: Koishi's welcome and settings pages (Chinese only, and the language is the server's) are left out.
  if (serverLocale()) ctx.on("activity", (activity) => ["home", "settings"].includes(activity.id) || undefined);
  ctx.page({
    path: "/anon-notify",
    // The menu's name follows the console's language like the page.
    name: () => messages[pageLocale()].pageTitle,
    icon: "activity:default",
    order: 450,
    // No `fields`: the page shows its sign-in form while the server sends it no data.
    component: Page,
  });
};
