import type { Context } from "@koishijs/client";
// Before the page, so the parts' own rules come later and refine the shared look.
import "./common.scss";
import Page from "./page.vue";

export default (ctx: Context) => {
  ctx.page({
    path: "/anon-notify",
    name: "Pi 会话",
    icon: "activity:default",
    order: 450,
    fields: ["anonNotify"],
    component: Page,
  });
};
