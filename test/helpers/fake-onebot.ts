/**
 * A loopback OneBot v11 implementation (what NapCat or LLOneBot run beside QQ) for the real
 * `koishi-plugin-adapter-onebot` over forward or reverse WebSocket: it answers actions by `echo`,
 * records every action it receives, and pushes message events as the QQ side would.
 */
import { WebSocket, WebSocketServer } from "ws";
import { ChangeWaiters } from "../../harness/wait.ts";

// Shapes checked once against koishi-plugin-adapter-onebot 6.9.4 (lib/index.js): `accept` sends
// `{ action, params, echo }` and resolves the answer whose `echo` matches; `Internal._get` takes
// `data` when `retcode` is 0 and throws SenderError otherwise; `initialize` calls `get_login_info`
// (decodeUser: `user_id`, `nickname`) and `get_guild_service_profile` (a failure is ignored);
// `getFriendList` maps `get_friend_list` entries through decodeUser (plain users, no `user`);
// `getMessage` calls `get_msg` and adapts `message_id`, `message`, `sender`, `group_id`; an event
// is anything with `post_type`, its `message` either a segment array or a CQ-code string, and a
// leading `reply` segment becomes `session.quote` through `get_msg`; `send_private_msg` gets
// `user_id` as a number and `message` as a segment array.

export interface Segment {
  type: string;
  data: Record<string, unknown>;
}

export interface ReceivedAction {
  action: string;
  params: Record<string, unknown>;
  echo: unknown;
}

/** A message the bot sent, as the fake received it. */
export interface SentMessage {
  messageId: number;
  /** `private:<user>` or the group id, as Koishi names the channel. */
  channelId: string;
  segments: Segment[];
  /** The text segments joined: what a person reads. */
  text: string;
}

interface StoredMessage {
  message_id: number;
  message_type: "private" | "group";
  group_id?: number;
  sender: { user_id: number; nickname: string };
  message: Segment[] | string;
  time: number;
}

/** How a pushed message is written: a segment array, or one CQ-code string (older implementations, `post_message_format: string`). */
export type MessageFormat = "array" | "string";

export interface FakeOneBotOptions {
  selfId: string;
  /** QQ numbers that are the bot's friends. */
  friends: string[];
}

/** Text as a CQ-code string carries it: `&`, `[` and `]` escaped (OneBot v11's rule). */
function cqEscape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/\[/g, "&#91;").replace(/\]/g, "&#93;");
}

/** Segments as one CQ-code string: text escaped, every other segment `[CQ:type,key=value]`. */
function cqString(segments: Segment[]): string {
  return segments
    .map((s) =>
      s.type === "text"
        ? cqEscape(String(s.data.text))
        : `[CQ:${s.type}${Object.entries(s.data)
            .map(([k, v]) => `,${k}=${cqEscape(String(v)).replace(/,/g, "&#44;")}`)
            .join("")}]`,
    )
    .join("");
}

export class FakeOneBot {
  readonly selfId: string;
  readonly friends: string[];
  readonly actions: ReceivedAction[] = [];
  readonly sent: SentMessage[] = [];
  /** When set, `send_private_msg` and `send_group_msg` fail with this retcode (and the implementation's words). */
  failSends: { retcode: number; wording: string } | null = null;
  readonly #server: WebSocketServer | undefined;
  readonly #sockets = new Set<WebSocket>();
  readonly #messages = new Map<number, StoredMessage>();
  readonly #changes = new ChangeWaiters();
  #nextMessageId = 1000;

  private constructor(server: WebSocketServer | undefined, options: FakeOneBotOptions) {
    this.#server = server;
    this.selfId = options.selfId;
    this.friends = [...options.friends];
    server?.on("connection", (socket) => this.#attach(socket));
  }

  /** Forward WebSocket (`protocol: "ws"`): the fake listens, the adapter connects to `endpoint`. */
  static async start(options: FakeOneBotOptions): Promise<FakeOneBot> {
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await new Promise<void>((resolve, reject) => server.once("listening", resolve).once("error", reject));
    return new FakeOneBot(server, options);
  }

  /** Reverse WebSocket (`protocol: "ws-reverse"`): the fake connects to the adapter's path on Koishi's server, as OneBot v11 says. */
  static async connect(url: string, options: FakeOneBotOptions): Promise<FakeOneBot> {
    const fake = new FakeOneBot(undefined, options);
    const socket = new WebSocket(url, { headers: { "x-self-id": options.selfId, "x-client-role": "Universal" } });
    // Listening before the socket opens: the adapter's first actions can come in the same chunk as the upgrade.
    fake.#attach(socket);
    await new Promise<void>((resolve, reject) => socket.once("open", resolve).once("error", reject));
    return fake;
  }

  /** The URL the adapter's `endpoint` points at (forward mode). */
  get endpoint(): string {
    const address = this.#server?.address();
    if (!address || typeof address === "string") throw new Error("the fake OneBot is not listening");
    return `ws://127.0.0.1:${address.port}`;
  }

  /** The actions named `action`, oldest first. */
  received(action: string): ReceivedAction[] {
    return this.actions.filter((a) => a.action === action);
  }

  /** A private message from `userId` (a friend's, or a stranger's); answers its message id. */
  pushPrivate(userId: string, segments: Segment[], format: MessageFormat = "array"): number {
    const subType = this.friends.includes(userId) ? "friend" : "other";
    return this.#push({ message_type: "private", sub_type: subType, user_id: Number(userId) }, userId, segments, format);
  }

  /** A message from `userId` in the group `groupId`; answers its message id. */
  pushGroup(groupId: string, userId: string, segments: Segment[], format: MessageFormat = "array"): number {
    return this.#push({ message_type: "group", sub_type: "normal", group_id: Number(groupId), user_id: Number(userId) }, userId, segments, format);
  }

  /** Waits until the bot has sent `count` more messages to `channelId` than `before`; answers those. */
  async sendsTo(channelId: string, before: number, count = 1, timeoutMs = 15_000): Promise<SentMessage[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const to = this.sent.filter((m) => m.channelId === channelId);
      if (to.length >= before + count) return to.slice(before);
      if (Date.now() > deadline) throw new Error(`never happened within ${timeoutMs} ms: ${count} message(s) to ${channelId} (saw ${to.length - before})`);
      await this.#changes.next(deadline - Date.now());
    }
  }

  /** How many messages the bot has sent to `channelId`. */
  countTo(channelId: string): number {
    return this.sent.filter((m) => m.channelId === channelId).length;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.terminate();
    const server = this.#server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #attach(socket: WebSocket): void {
    this.#sockets.add(socket);
    socket.on("close", () => this.#sockets.delete(socket));
    socket.on("message", (data) => this.#answer(socket, String(data)));
  }

  #push(base: Record<string, unknown>, userId: string, segments: Segment[], format: MessageFormat): number {
    const messageId = this.#nextMessageId++;
    const sender = { user_id: Number(userId), nickname: `user ${userId}`, sex: "unknown", age: 0 };
    const message = format === "array" ? segments : cqString(segments);
    const stored: StoredMessage = { message_id: messageId, message_type: base.message_type as "private" | "group", sender, message, time: nowSeconds() };
    if (base.group_id !== undefined) stored.group_id = base.group_id as number;
    this.#messages.set(messageId, stored);
    const event = {
      time: stored.time,
      self_id: Number(this.selfId),
      post_type: "message",
      ...base,
      message_id: messageId,
      message,
      raw_message: cqString(segments),
      font: 0,
      sender,
    };
    for (const socket of this.#sockets) socket.send(JSON.stringify(event));
    return messageId;
  }

  #answer(socket: WebSocket, text: string): void {
    const request = JSON.parse(text) as ReceivedAction;
    this.actions.push(request);
    const reply = (data: unknown) => socket.send(JSON.stringify({ status: "ok", retcode: 0, data, echo: request.echo }));
    const fail = (retcode: number, wording: string) =>
      socket.send(JSON.stringify({ status: "failed", retcode, msg: wording, wording, data: null, echo: request.echo }));
    const params = request.params ?? {};
    switch (request.action) {
      case "get_login_info":
        return reply({ user_id: Number(this.selfId), nickname: "Anon" });
      case "get_friend_list":
        return reply(this.friends.map((id) => ({ user_id: Number(id), nickname: `friend ${id}`, remark: "" })));
      case "get_stranger_info":
        return reply({ user_id: Number(params.user_id), nickname: `user ${params.user_id}`, sex: "unknown", age: 0 });
      case "get_msg": {
        const found = this.#messages.get(Number(params.message_id));
        return found ? reply({ ...found, real_id: found.message_id }) : fail(1404, "消息不存在");
      }
      case "send_private_msg":
      case "send_group_msg": {
        if (this.failSends) return fail(this.failSends.retcode, this.failSends.wording);
        const group = request.action === "send_group_msg";
        const segments = params.message as Segment[];
        const messageId = this.#nextMessageId++;
        const stored: StoredMessage = {
          message_id: messageId,
          message_type: group ? "group" : "private",
          sender: { user_id: Number(this.selfId), nickname: "Anon" },
          message: segments,
          time: nowSeconds(),
        };
        if (group) stored.group_id = Number(params.group_id);
        this.#messages.set(messageId, stored);
        const channelId = group ? String(params.group_id) : `private:${params.user_id}`;
        const words = segments.filter((s) => s.type === "text").map((s) => String(s.data.text));
        this.sent.push({ messageId, channelId, segments, text: words.join("") });
        this.#changes.changed();
        return reply({ message_id: messageId });
      }
      default:
        // Unsupported actions (`get_guild_service_profile` on most implementations) fail as they do there.
        return fail(1404, "不支持的 API");
    }
  }
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** One text segment. */
export const text = (content: string): Segment => ({ type: "text", data: { text: content } });
/** A reply (quote) segment for the message `id`. */
export const reply = (id: number | string): Segment => ({ type: "reply", data: { id: String(id) } });
