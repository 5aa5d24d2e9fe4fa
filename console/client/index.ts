import type { Context } from "@koishijs/client";
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
