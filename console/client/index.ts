import type { Context } from "@koishijs/client";
// Before the page, so the parts' own rules come later and refine the shared look.
import "./common.scss";
import { retire } from "./call.ts";
import { followLocale, pageLocale, seedLocale, serverLocale } from "./locale.ts";
import messages from "./messages.ts";
import Page from "./page.vue";

export default (ctx: Context) => {
  // Koishi's client drops this copy at a reconnect and loads a new one; this copy then stays quiet.
  ctx.on("dispose", retire);
  seedLocale();
  followLocale(ctx);
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
