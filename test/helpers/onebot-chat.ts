/**
 * The chat on QQ through the real OneBot adapter: a Koishi app (harness/koishi.ts) whose configured
 * bot is `koishi-plugin-adapter-onebot` connected over WebSocket (forward by default) to the loopback
 * fake (fake-onebot.ts); the owner `10001` is the bot's friend, the stranger `20002` is not.
 */
import { createRequire } from "node:module";
import type { Context, Plugin } from "koishi";
import { OPERATOR_TOKEN } from "../../harness/agent-api.ts";
import { closeAll } from "../../harness/cleanup.ts";
import { startKoishi, type KoishiHarness, type KoishiOptions } from "../../harness/koishi.ts";
import { RECIPIENT } from "../../harness/extension-env.ts";
import { waitUntil } from "../../harness/wait.ts";
import { BOT_ONLINE } from "../../server/bot.ts";
import { FakeOneBot, text, type MessageFormat, type Segment, type SentMessage } from "./fake-onebot.ts";

const require = createRequire(import.meta.url);
const OneBotAdapter = require("koishi-plugin-adapter-onebot").default as Plugin<Context>;
const HttpService = require("@koishijs/plugin-http").default as Plugin<Context>;

/** The QQ numbers the extension's test environment names (harness/extension-env.ts). */
export const OWNER = RECIPIENT.qq;
export const ANON = RECIPIENT.anonQq;
export const STRANGER = "20002";
export const GROUP = "30003";
export const BOT_ID = `onebot:${ANON}`;

export interface OneBotChat extends KoishiHarness {
  onebot: FakeOneBot;
  /**
   * `from` writes `message` (text, or segments) in its private chat, or in `group`; answers what the
   * bot sent back to that chat, once it sent something.
   */
  exchange(message: string | Segment[], options?: { from?: string; group?: string; format?: MessageFormat }): Promise<SentMessage[]>;
}

/** `ws`: Koishi connects to the fake (forward WebSocket); `ws-reverse`: the fake connects to Koishi's `/onebot`. */
export type OneBotMode = "ws" | "ws-reverse";

export async function startOneBotChat(options: KoishiOptions & { friends?: string[]; mode?: OneBotMode } = {}): Promise<OneBotChat> {
  const fakeOptions = { selfId: ANON, friends: options.friends ?? [OWNER] };
  const reverse = options.mode === "ws-reverse";
  const forward = reverse ? undefined : await FakeOneBot.start(fakeOptions);
  const adapter = forward ? { protocol: "ws", endpoint: forward.endpoint, retryInterval: 100 } : { protocol: "ws-reverse", path: "/onebot" };
  let koishi: KoishiHarness;
  try {
    koishi = await startKoishi({
      ...options,
      config: { botId: BOT_ID, recipientId: OWNER, operatorToken: OPERATOR_TOKEN, ...options.config },
      plugins: async (use, app) => {
        use(HttpService);
        use(OneBotAdapter, { selfId: ANON, responseTimeout: 10_000, ...adapter });
        await options.plugins?.(use, app);
      },
    });
  } catch (error) {
    await forward?.close();
    throw error;
  }
  const stop = koishi.stop;
  let onebot = forward;
  try {
    onebot ??= await FakeOneBot.connect(new URL("/onebot", koishi.baseUrl.replace(/^http/, "ws")).href, fakeOptions);
    await waitUntil(() => koishi.app.bots[BOT_ID]?.status === BOT_ONLINE, "the OneBot bot online", 15_000);
  } catch (error) {
    await closeAll(stop, () => onebot?.close());
    throw error;
  }
  const fake = onebot;
  return Object.assign(koishi, {
    onebot: fake,
    stop: () => closeAll(stop, () => fake.close()),
    async exchange(message: string | Segment[], how: { from?: string; group?: string; format?: MessageFormat } = {}) {
      const from = how.from ?? OWNER;
      const channel = how.group ?? `private:${from}`;
      const before = fake.countTo(channel);
      const segments = typeof message === "string" ? [text(message)] : message;
      if (how.group) fake.pushGroup(how.group, from, segments, how.format);
      else fake.pushPrivate(from, segments, how.format);
      return fake.sendsTo(channel, before);
    },
  });
}
