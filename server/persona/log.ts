/** A persona that prints each block it would inject, so the standalone server shows events without YesImBot. */
import type { Context } from "koishi";
import { instanceText } from "../locales/load.ts";
import type { PersonaSlot } from "./port.ts";

/** How /health tells the log persona from a real one. */
/** Below every real persona, so any of them takes the notices first. */
const LOG_PERSONA_PRIORITY = 0;

export const LOG_PERSONA_NAME = "log";

export const LogPersona = {
  name: "notify-webhook-log-persona",
  reusable: true,
  apply(ctx: Context, personas: PersonaSlot) {
    const logger = ctx.logger("anon-persona");
    personas.provide(
      ctx,
      {
        name: LOG_PERSONA_NAME,
        async inject({ block }) {
          logger.info("%s\n%s", instanceText(ctx, "anon-notify.log-persona", {}), block);
          return { kind: "injected" };
        },
      },
      LOG_PERSONA_PRIORITY,
    );
  },
};
