/** Another extension for a real Pi session: a `deploy` tool that asks the person a confirm dialog with `title` before it "deploys". */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

export function confirmingDeployer(title: string) {
  return (pi: ExtensionAPI) => {
    pi.registerTool({
      name: "deploy",
      label: "deploy",
      description: "Deploys after asking.",
      parameters: Type.Object({}),
      async execute(_id, _params, _signal, _onUpdate, ctx) {
        const yes = await ctx.ui.confirm(title, "确认后开始部署");
        return { content: [{ type: "text", text: yes ? "deployed" : "cancelled" }], details: undefined };
      },
    });
  };
}
