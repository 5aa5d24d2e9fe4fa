/**
 * The chat side for tests and the demo: a real Koishi app (harness/koishi.ts) with plugin-mock's
 * bot `mock:514` as the configured bot, the owner `10001`, and chat clients for the owner's private
 * chat, a stranger and the owner in a group. plugin-mock's bot can only answer inside a client's
 * exchange, so `bot.sendMessage` outside one (direct notices, messages to the owner) is recorded,
 * with a message id as a platform would return.
 */
import { createRequire } from "node:module";
import type { Bot, Context, Fragment, Plugin } from "koishi";
import type {} from "@koishijs/plugin-mock";
import { koishi } from "../server/koishi.ts";
import { OPERATOR_TOKEN } from "./agent-api.ts";
import { startKoishi, type KoishiHarness, type KoishiOptions } from "./koishi.ts";

const require = createRequire(import.meta.url);
const MockBot = require("@koishijs/plugin-mock").default as Plugin<Context>;
// Koishi's `http` service, which a Koishi install loads by default: the chat fetches attached images with it.
const HttpService = require("@koishijs/plugin-http").default as Plugin<Context>;

export const BOT_ID = "mock:514";
export const OWNER = "10001";
export const STRANGER = "20002";
export const GROUP = "group-1";

export interface SentMessage {
  id: string;
  channelId: string;
  text: string;
}

export interface ChatHarness extends KoishiHarness {
  /** What the bot sent outside a client exchange, oldest first; survives restarts. */
  sent: SentMessage[];
  owner(): ReturnType<Context["mock"]["client"]>;
  stranger(): ReturnType<Context["mock"]["client"]>;
  ownerInGroup(): ReturnType<Context["mock"]["client"]>;
}

export async function startChat(options: KoishiOptions = {}): Promise<ChatHarness> {
  const sent: SentMessage[] = [];
  const koishiHarness = await startKoishi({
    ...options,
    config: { botId: BOT_ID, recipientId: OWNER, operatorToken: OPERATOR_TOKEN, ...options.config },
    plugins: async (use, app) => {
      use(HttpService);
      // Recorded from the moment the bot exists, so sends made while the app starts are caught too.
      // (Announced from the bot's constructor, before its id is set: the app has no other bot.)
      app.on("bot-added", (bot) => record(bot, sent));
      use(MockBot, { selfId: "514" });
      await options.plugins?.(use, app);
    },
  });
  return Object.assign(koishiHarness, {
    sent,
    owner: () => koishiHarness.app.mock.client(OWNER),
    stranger: () => koishiHarness.app.mock.client(STRANGER),
    ownerInGroup: () => koishiHarness.app.mock.client(OWNER, GROUP),
  });
}

/** Sends outside a client exchange are recorded (as plain text) and get ids `m-1`, `m-2`, …. */
function record(bot: Bot, sent: SentMessage[]): void {
  const original = bot.sendMessage.bind(bot);
  bot.createDirectChannel = async (userId: string) => ({ id: `private:${userId}`, type: 1 });
  bot.sendMessage = async (channelId: string, fragment: Fragment, guildId?: string, options?: { session?: unknown }) => {
    if ((options?.session as { client?: unknown } | undefined)?.client) return original(channelId, fragment, guildId, options as never);
    const id = `m-${sent.length + 1}`;
    sent.push({
      id,
      channelId,
      text: koishi.h
        .normalize(fragment)
        .map((element) => element.toString(true))
        .join(""),
    });
    return [id];
  };
}
