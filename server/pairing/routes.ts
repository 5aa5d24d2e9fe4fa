/** `POST /pair`, and the one log line that offers the code when nobody else prints it. */
import type { Context } from "koishi";
import type {} from "@koishijs/plugin-server";
import { formatPairingCode, PAIRING_PATH, PAIRING_TTL_MS, PairRequest, type PairAnswer } from "../../protocol/pairing.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { instanceText } from "../locales/load.ts";
import type { PersonaSlot } from "../persona/port.ts";
import { chatReachesOwner, noticeFacts } from "../status/notices.ts";
import type { PairingCodes } from "./codes.ts";

export { PairingCodes } from "./codes.ts";
import { pairedRecipient } from "./recipient.ts";
import type { DirectTarget } from "../handover/direct.ts";

/** `announced`: a code someone else prints (npm start); without one, a code is issued and logged here. */
type PairingDeps = { api: HttpApi; codes: PairingCodes; owner: DirectTarget; personas: PersonaSlot; token: string; announced: boolean };

/** The link `/anon-notify-setup` takes: the API's address, the code in the fragment (never sent). */
export function pairingLink(origin: string, code: string): string {
  return `${origin}${API_BASE_PATH}${PAIRING_PATH}#${formatPairingCode(code)}`;
}

export const PairingRoutes = {
  name: "notify-webhook-pairing",
  apply(ctx: Context, { api, codes, owner, personas, token, announced }: PairingDeps) {
    const logger = ctx.logger("notify-webhook");
    api.route(ctx, { method: "POST", path: PAIRING_PATH, auth: "pairing", maxBytes: 1024 }, (request) => {
      const redeemed = codes.redeem(parseWith(PairRequest, request.body).code, request.remoteAddress);
      if (!redeemed.ok && redeemed.why === "rate_limited") throw new DomainError("rate_limited", { retryAfterSeconds: redeemed.retryAfterSeconds });
      if (!redeemed.ok) throw new DomainError("pairing_code_invalid");
      logger.info(instanceText(ctx, "anon-notify.pairing.redeemed", { address: request.remoteAddress }));
      const recipient = pairedRecipient(owner);
      const chat = chatReachesOwner(noticeFacts(ctx, personas, owner));
      return json(200, { token, recipient: { qq: recipient.qq, anon_qq: recipient.anonQq }, chat } satisfies PairAnswer);
    });
    if (announced) return;
    const offer = () =>
      logger.info(instanceText(ctx, "anon-notify.pairing.offer", { link: pairingLink(serverOrigin(ctx), codes.issue()), minutes: PAIRING_TTL_MS / 60_000 }));
    if (ctx.server.port) offer();
    else ctx.on("server/ready", offer);
  },
};

/** Where a Pi reaches this server: plugin-server's `selfUrl`, else its host and port. */
function serverOrigin(ctx: Context): string {
  const config = ctx.server.config as { selfUrl?: string; host?: string };
  return config.selfUrl ? config.selfUrl.replace(/\/+$/, "") : localOrigin(config.host, ctx.server.port);
}

/** Where a Pi on this machine reaches a server listening on `host`: a wildcard host listens everywhere, so through loopback. */
export function localOrigin(host: string | undefined, port: number): string {
  const reachable = !host || ["0.0.0.0", "::"].includes(host) ? "127.0.0.1" : host;
  return `http://${reachable.includes(":") ? `[${reachable}]` : reachable}:${port}`;
}
