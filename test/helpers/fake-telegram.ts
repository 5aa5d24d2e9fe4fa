/**
 * A loopback Telegram Bot API for `@satorijs/adapter-telegram` 4.5.11 (polling mode, `endpoint` set
 * to `url`): records every call as the adapter sent it and injects updates. Checked once against the
 * adapter's source (bot.ts, polling.ts, message.ts, utils.ts): the methods and shapes below are the ones it calls and reads.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { waitUntil } from "../../harness/wait.ts";

export interface TelegramCall {
  method: string;
  body: Record<string, any>;
}

export interface TelegramUser {
  id: number;
  first_name: string;
  username?: string;
}

interface StoredMessage {
  message_id: number;
  chat_id: number;
  text: string;
  reply_markup: unknown;
}

export interface FakeTelegram {
  /** The adapter's `endpoint`. */
  url: string;
  token: string;
  bot: TelegramUser;
  calls: TelegramCall[];
  /** The bot's messages as the chat shows them now (edits applied). */
  messages: Map<number, StoredMessage>;
  /** A private message from `from` (a `/command` gets its `bot_command` entity); resolves once the adapter fetched it. */
  privateMessage(from: TelegramUser, text: string, options?: { replyTo?: number }): Promise<void>;
  groupMessage(from: TelegramUser, text: string): Promise<void>;
  /** A press on one of the bot's messages' buttons, in `from`'s private chat with the bot. */
  press(from: TelegramUser, messageId: number, data: string): Promise<void>;
  waitFor(method: string, test?: (body: Record<string, any>) => boolean, what?: string): Promise<TelegramCall>;
  close(): Promise<void>;
}

const GROUP_CHAT = { id: -100123, type: "supergroup", title: "group" };

export async function startFakeTelegram(): Promise<FakeTelegram> {
  const token = "123456:fake-token";
  const bot: TelegramUser & { is_bot: true } = { id: 123456, is_bot: true, first_name: "Anon", username: "anon_bot" };
  const calls: TelegramCall[] = [];
  const messages = new Map<number, StoredMessage>();
  const updates: Record<string, unknown>[] = [];
  let updateId = 100;
  let messageId = 1000;
  const polls = new Set<() => void>();
  const fetched = new Set<number>();

  const wakePolls = () => {
    for (const wake of [...polls]) wake();
  };

  const reply = (res: ServerResponse, result: unknown, status = 200) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(status === 200 ? { ok: true, result } : { ok: false, error_code: status, description: String(result) }));
  };

  const botMessage = (chatId: number, text: string, replyMarkup: unknown) => {
    const stored = { message_id: ++messageId, chat_id: chatId, text, reply_markup: replyMarkup };
    messages.set(stored.message_id, stored);
    return asMessage(stored);
  };
  const asMessage = (m: StoredMessage) => ({
    message_id: m.message_id,
    date: Math.floor(Date.now() / 1000),
    chat: m.chat_id < 0 ? GROUP_CHAT : { id: m.chat_id, type: "private", first_name: "owner" },
    from: bot,
    text: m.text,
    ...(m.reply_markup ? { reply_markup: m.reply_markup } : {}),
  });

  async function getUpdates(body: Record<string, any>, res: ServerResponse) {
    const offset = Number(body.offset ?? 0);
    const pending = () => updates.filter((u) => (u.update_id as number) >= offset);
    if (pending().length === 0 && Number(body.timeout) > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          polls.delete(done);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(done, Number(body.timeout) * 1000);
        polls.add(done);
      });
    }
    const result = pending();
    for (const u of result) fetched.add(u.update_id as number);
    reply(res, result);
  }

  function handle(method: string, body: Record<string, any>, res: ServerResponse) {
    switch (method) {
      case "getMe":
        return reply(res, bot);
      case "getUserProfilePhotos":
        return reply(res, { total_count: 0, photos: [] });
      case "getWebhookInfo":
        return reply(res, { url: "", has_custom_certificate: false, pending_update_count: 0 });
      case "deleteWebhook":
      case "setWebhook":
      case "setMyCommands":
      case "answerCallbackQuery":
        return reply(res, true);
      case "getUpdates":
        return void getUpdates(body, res);
      case "sendMessage":
        return reply(res, botMessage(Number(body.chat_id), String(body.text ?? ""), body.reply_markup));
      case "editMessageText":
      case "editMessageReplyMarkup": {
        const stored = messages.get(Number(body.message_id));
        if (!stored) return reply(res, "Bad Request: message to edit not found", 400);
        if (method === "editMessageText") stored.text = String(body.text ?? "");
        // Telegram drops the inline keyboard of a message edited without one.
        stored.reply_markup = body.reply_markup;
        return reply(res, asMessage(stored));
      }
      case "getChat":
        return reply(res, { id: Number(body.chat_id), type: "private", first_name: "owner" });
      default:
        return reply(res, `Not Found: method ${method} is not in this fake`, 404);
    }
  }

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(req.url ?? "");
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    if (!match || match[1] !== token) return reply(res, "Unauthorized", 401);
    const body = raw ? (JSON.parse(raw) as Record<string, any>) : {};
    calls.push({ method: match[2]!, body });
    handle(match[2]!, body, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  /** Queues an update and resolves once a poll has taken it. */
  const inject = async (update: Record<string, unknown>) => {
    const id = ++updateId;
    updates.push({ update_id: id, ...update });
    wakePolls();
    await waitUntil(() => fetched.has(id), `the adapter fetched update ${id}`, 30_000);
  };
  const userMessage = (from: TelegramUser, chat: object, text: string, replyTo?: number) => {
    const command = /^\/\S+/.exec(text);
    const quoted = replyTo === undefined ? undefined : messages.get(replyTo);
    return {
      message: {
        message_id: ++messageId,
        date: Math.floor(Date.now() / 1000),
        chat,
        from: { ...from, is_bot: false, language_code: "zh-hans" },
        text,
        ...(command ? { entities: [{ type: "bot_command", offset: 0, length: command[0].length }] } : {}),
        ...(quoted ? { reply_to_message: asMessage(quoted) } : {}),
      },
    };
  };

  return {
    url,
    token,
    bot,
    calls,
    messages,
    privateMessage: (from, text, options) => inject(userMessage(from, { id: from.id, type: "private", first_name: from.first_name }, text, options?.replyTo)),
    groupMessage: (from, text) => inject(userMessage(from, GROUP_CHAT, text)),
    press: (from, pressedId, data) => {
      const stored = messages.get(pressedId);
      if (!stored) throw new Error(`no message ${pressedId} to press on`);
      return inject({
        callback_query: { id: `cb-${updateId + 1}`, from: { ...from, is_bot: false }, chat_instance: "1", data, message: asMessage(stored) },
      });
    },
    waitFor: (method, test = () => true, what = method) =>
      waitUntil(() => calls.find((c) => c.method === method && test(c.body)), `the adapter called ${what}`, 30_000),
    close: async () => {
      for (const wake of [...polls]) wake();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
