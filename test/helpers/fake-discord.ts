/**
 * A loopback Discord for `@koishijs/plugin-adapter-discord` 4.5.3 (`@satorijs/adapter-discord`
 * 4.6.0, `endpoint` set to `url`): REST plus a gateway WebSocket (HELLO, IDENTIFY, READY, heartbeats,
 * dispatches). Records every REST call and injects events; checked once against the adapter's source (bot.ts, ws.ts, message.ts, utils.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { waitUntil } from "../../harness/wait.ts";

export interface DiscordCall {
  method: string;
  path: string;
  body: any;
  authorization: string | undefined;
}

export interface DiscordUser {
  id: string;
  username: string;
}

interface StoredMessage {
  id: string;
  channel_id: string;
  content: string;
  components: unknown[];
  author: DiscordUser;
}

export interface FakeDiscord {
  url: string;
  token: string;
  bot: DiscordUser & { bot: true };
  applicationId: string;
  calls: DiscordCall[];
  /** Every message in every channel as it reads now (edits applied). */
  messages: Map<string, StoredMessage>;
  /** The DM channel the fake opens for a user. */
  dmChannel(userId: string): string;
  /** A DM from `from`; `replyTo` makes it a reply quoting that message. */
  directMessage(from: DiscordUser, content: string, options?: { replyTo?: string }): Promise<void>;
  /** A press on a component of message `messageId`, in `from`'s DM with the bot. */
  press(from: DiscordUser, messageId: string, customId: string): Promise<string>;
  /** A slash command: `/anon <sub> <options…>` in `from`'s DM. */
  slash(from: DiscordUser, name: string, sub: string, options?: { name: string; value: string }[]): Promise<string>;
  waitFor(method: string, path: RegExp, what?: string): Promise<DiscordCall>;
  close(): Promise<void>;
}

const GATEWAY_PATH = "/gateway-ws";
let snowflake = 900_000_000_000_000_000n;
const nextId = () => String(++snowflake);

export async function startFakeDiscord(): Promise<FakeDiscord> {
  const token = "fake-discord-token";
  const bot = { id: "100000000000000001", username: "anon", bot: true as const, discriminator: "0", global_name: "Anon", avatar: null };
  const applicationId = bot.id;
  const calls: DiscordCall[] = [];
  const messages = new Map<string, StoredMessage>();
  const sockets = new Set<WebSocket>();
  let seq = 0;
  let identified: WebSocket | undefined;

  const message = (channelId: string, author: object, content: string, components: unknown[] = []) => {
    const stored = { id: nextId(), channel_id: channelId, content, components, author: author as DiscordUser };
    messages.set(stored.id, stored);
    return wire(stored);
  };
  const wire = (m: StoredMessage) => ({
    ...m,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    embeds: [],
    attachments: [],
    mentions: [],
    mention_roles: [],
    type: 0,
  });
  const dmChannel = (userId: string) => `2${userId.slice(1)}`;

  function rest(method: string, path: string, body: any): [number, unknown] {
    let m: RegExpExecArray | null;
    if (method === "GET" && path === "/gateway/bot")
      return [200, { url: wsUrl, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } }];
    if (method === "GET" && path === "/users/@me") return [200, bot];
    if (method === "POST" && path === "/users/@me/channels")
      return [200, { id: dmChannel(String(body.recipient_id)), type: 1, recipients: [{ id: body.recipient_id }] }];
    if (method === "PUT" && (m = /^\/applications\/(\d+)\/commands$/.exec(path)))
      return [200, (body as object[]).map((c) => ({ ...c, id: nextId(), application_id: m![1] }))];
    if (method === "POST" && /^\/interactions\/\d+\/[^/]+\/callback$/.test(path)) return [204, null];
    if (method === "POST" && (m = /^\/channels\/(\d+)\/messages$/.exec(path))) return [200, message(m[1]!, bot, body.content ?? "", body.components ?? [])];
    if (method === "POST" && (m = /^\/webhooks\/\d+\/([^/?]+)$/.exec(path)))
      return [200, message(interactions.get(m[1]!) ?? "0", bot, body.content ?? "", body.components ?? [])];
    if ((m = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path))) {
      const stored = messages.get(m[2]!);
      if (!stored) return [404, { message: "Unknown Message", code: 10008 }];
      if (method === "PATCH") {
        if ("content" in body) stored.content = body.content;
        if ("components" in body) stored.components = body.components;
      }
      return [200, wire(stored)];
    }
    if (method === "GET" && (m = /^\/channels\/(\d+)$/.exec(path))) return [200, { id: m[1], type: 1 }];
    return [404, { message: `${method} ${path} is not in this fake`, code: 0 }];
  }
  /** Interaction token → its channel, so a follow-up lands where the interaction was. */
  const interactions = new Map<string, string>();

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const path = (req.url ?? "").split("?")[0]!;
    const body = raw && req.headers["content-type"]?.includes("json") ? JSON.parse(raw) : raw || null;
    calls.push({ method: req.method ?? "", path, body, authorization: req.headers.authorization });
    const [status, answer] =
      req.headers.authorization === `Bot ${token}` ? rest(req.method ?? "", path, body) : [401, { message: "401: Unauthorized", code: 0 }];
    res.writeHead(status, status === 204 ? {} : { "content-type": "application/json" });
    res.end(status === 204 ? undefined : JSON.stringify(answer));
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) => {
    if (!req.url?.startsWith(GATEWAY_PATH)) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => gateway(ws));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  const wsUrl = `ws://127.0.0.1:${port}${GATEWAY_PATH}`;

  function gateway(ws: WebSocket) {
    sockets.add(ws);
    ws.on("close", () => sockets.delete(ws));
    ws.send(JSON.stringify({ op: 10, d: { heartbeat_interval: 30_000 } }));
    ws.on("message", (data) => {
      const payload = JSON.parse(String(data)) as { op: number; d: any };
      if (payload.op === 1) ws.send(JSON.stringify({ op: 11 }));
      if (payload.op === 2 && payload.d?.token === token) {
        identified = ws;
        send("READY", { v: 10, user: bot, guilds: [], session_id: "fake-session", resume_gateway_url: wsUrl, application: { id: applicationId, flags: 0 } });
      }
    });
  }
  const send = (t: string, d: unknown) => identified?.send(JSON.stringify({ op: 0, t, s: ++seq, d }));

  /** Dispatches an event and resolves once the adapter has answered what `done` waits for. */
  const dispatch = async (t: string, d: unknown, done: () => boolean, what: string) => {
    await waitUntil(() => identified, "the adapter identified on the gateway", 30_000);
    send(t, d);
    await waitUntil(done, what, 30_000);
  };
  const callbackFor = (id: string) => () => calls.some((c) => c.method === "POST" && c.path.startsWith(`/interactions/${id}/`));
  const interaction = (from: DiscordUser, type: number, data: object, extra: object = {}) => {
    const id = nextId();
    const interactionToken = `itoken-${id}`;
    const channel = dmChannel(from.id);
    interactions.set(interactionToken, channel);
    return { id, d: { id, application_id: applicationId, type, token: interactionToken, version: 1, channel_id: channel, user: from, data, ...extra } };
  };

  return {
    url,
    token,
    bot,
    applicationId,
    calls,
    messages,
    dmChannel,
    directMessage: async (from, content, options) => {
      const channel = dmChannel(from.id);
      const sent = message(channel, from, content);
      const reference = options?.replyTo ? { message_reference: { message_id: options.replyTo, channel_id: channel } } : {};
      await dispatch("MESSAGE_CREATE", { ...sent, ...reference }, () => true, "the message was dispatched");
    },
    press: async (from, messageId, customId) => {
      const stored = messages.get(messageId);
      if (!stored) throw new Error(`no message ${messageId} to press on`);
      const { id, d } = interaction(from, 3, { custom_id: customId, component_type: 2 }, { message: wire(stored) });
      await dispatch("INTERACTION_CREATE", d, callbackFor(id), `the adapter answered interaction ${id}`);
      return d.token;
    },
    slash: async (from, name, sub, options = []) => {
      const { id, d } = interaction(from, 2, {
        id: nextId(),
        name,
        type: 1,
        options: [{ type: 1, name: sub, options: options.map((o) => ({ type: 3, ...o })) }],
      });
      await dispatch("INTERACTION_CREATE", d, callbackFor(id), `the adapter answered interaction ${id}`);
      return d.token;
    },
    waitFor: (method, path, what = `${method} ${path}`) =>
      waitUntil(() => calls.find((c) => c.method === method && path.test(c.path)), `the adapter called ${what}`, 30_000),
    close: async () => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
