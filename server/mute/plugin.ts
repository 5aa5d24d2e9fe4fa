/** Reads the stored mutes at start and holds the API at 503 until then, so no notice slips past a mute. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { HttpApi } from "../http/api.ts";
import type { MuteStore } from "./store.ts";
import { instanceText } from "../locales/load.ts";

const LOAD_RETRY_MS = 1000;

export const MuteLoader = {
  name: "notify-webhook-mute",
  reusable: true,
  apply(ctx: Context, { api, mutes }: { api: HttpApi; mutes: MuteStore }) {
    const release = api.holdUntilReady(ctx);
    const load = async () => {
      try {
        await mutes.load();
        release();
      } catch (error) {
        ctx.logger("notify-webhook").error(instanceText(ctx, "anon-notify.log.mutes-unreadable", { error: errorText(error) }));
        ctx.setTimeout(load, LOAD_RETRY_MS);
      }
    };
    ctx.on("ready", load);
  },
};
