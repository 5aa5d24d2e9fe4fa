/**
 * The owner's chat through a REAL Koishi adapter against a loopback fake of its platform: Koishi
 * with notify-webhook (harness/koishi.ts), Koishi's http service, and the adapter's bot as the
 * configured bot, online before the test goes on. The fake is closed after the app.
 */
import { createRequire } from "node:module";
import type { Context, Plugin } from "koishi";
import { OPERATOR_TOKEN } from "../../harness/agent-api.ts";
import { startKoishi, type KoishiHarness, type KoishiOptions } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { BOT_ONLINE } from "../../server/bot.ts";
import { startFakeDiscord, type FakeDiscord } from "./fake-discord.ts";
import { startFakeTelegram, type FakeTelegram } from "./fake-telegram.ts";

const require = createRequire(import.meta.url);
const HttpService = require("@koishijs/plugin-http").default as Plugin<Context>;
const TelegramBot = require("@satorijs/adapter-telegram").default as Plugin<Context>;
const DiscordBot = require("@koishijs/plugin-adapter-discord").default as Plugin<Context>;

export const TELEGRAM_OWNER = { id: 10001, first_name: "Owner", username: "owner" };
export const TELEGRAM_STRANGER = { id: 20002, first_name: "Stranger", username: "stranger" };
export const DISCORD_OWNER = { id: "300000000000000001", username: "owner" };
export const DISCORD_STRANGER = { id: "300000000000000002", username: "stranger" };

async function withAdapter<F extends { close(): Promise<void> }>(
  fake: F,
  botId: string,
  recipientId: string,
  adapter: Plugin<Context>,
  adapterConfig: object,
  options: KoishiOptions,
): Promise<KoishiHarness & { fake: F }> {
  let harness: KoishiHarness;
  try {
    harness = await startKoishi({
      ...options,
      config: { botId, recipientId, operatorToken: OPERATOR_TOKEN, ...options.config },
      plugins: async (use, app) => {
        use(HttpService);
        use(adapter, adapterConfig);
        await options.plugins?.(use, app);
      },
    });
  } catch (error) {
    await fake.close();
    throw error;
  }
  await waitUntil(() => harness.app.bots[botId]?.status === BOT_ONLINE, `${botId} online`, 30_000);
  const stop = harness.stop;
  return Object.assign(harness, { fake, stop: () => stop().finally(() => fake.close()) });
}

export async function startTelegramChat(options: KoishiOptions = {}): Promise<KoishiHarness & { fake: FakeTelegram }> {
  const fake = await startFakeTelegram();
  const config = { token: fake.token, protocol: "polling", endpoint: fake.url, pollingTimeout: 5_000, retryTimes: 2, retryInterval: 200 };
  return withAdapter(fake, `telegram:${fake.bot.id}`, String(TELEGRAM_OWNER.id), TelegramBot, config, options);
}

export async function startDiscordChat(options: KoishiOptions = {}): Promise<KoishiHarness & { fake: FakeDiscord }> {
  const fake = await startFakeDiscord();
  const config = { token: fake.token, endpoint: fake.url, retryTimes: 2, retryInterval: 200 };
  return withAdapter(fake, `discord:${fake.bot.id}`, DISCORD_OWNER.id, DiscordBot, config, options);
}
