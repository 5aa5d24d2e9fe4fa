/**
 * The owner's words through the REAL Telegram and Discord adapters (loopback fakes) into a REAL Pi
 * session: text with `<…>`, `<`, `>` and `&` reaches the model byte-equal, however it was typed, and
 * every reply the fakes record is escaped exactly once for its platform.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import fc from "fast-check";
import { agentApi } from "../../harness/agent-api.ts";
import { listedOnline, piOnServer } from "../../harness/extension-env.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { ai, lastUserText, type PiHarness } from "../../harness/pi.ts";
import { koishi } from "../../server/koishi.ts";
import { discordMarkup, type DiscordText } from "../../server/chat/discord-text.ts";
import { settled } from "../../harness/session-commands.ts";
import { waitUntil } from "../../harness/wait.ts";
import { DISCORD_OWNER, TELEGRAM_OWNER, startDiscordChat, startTelegramChat } from "../helpers/adapter-chat.ts";
import { markupText } from "../helpers/markup-text.ts";

const TYPED = "fix the <Header> component, then check a < b && c > d";
/** What an agent reports as its activity: shown in `anon.sessions` as it was sent. */
const ACTIVITY = '<b>bash</b> & "x"';
const ENTITIES = /&lt;|&gt;|&amp;|&quot;|&#/;

/** A Pi session switched on and online as #1 on `chat`. */
async function onlinePi(t: TestContext, chat: KoishiHarness): Promise<PiHarness> {
  const pi = await piOnServer(t, chat, { userConfig: { language: "zh-CN" } });
  await pi.prompt("/anon-notify");
  await listedOnline(chat, pi);
  return pi;
}

/** Sends what `typeIt` types and resolves once Pi has answered it; returns what the model read. */
async function modelReads(pi: PiHarness, typeIt: () => Promise<unknown>): Promise<string> {
  pi.script([ai.fauxAssistantMessage("好的")]);
  const answered = settled(pi);
  await typeIt();
  await answered;
  return lastUserText(pi);
}

/**
 * Telegram's `parse_mode: html` text as the chat shows it: the adapter escapes `&`, `<` and `>` and
 * sends no tags for plain text, so a raw `<` on the wire would be a tag, and is refused here.
 */
function telegramShows(html: string): string {
  assert.doesNotMatch(html, /</, `plain text goes out without tags: ${html}`);
  const named: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"' };
  return html.replace(/&(lt|gt|amp|quot);/g, (_, name: string) => named[name]!);
}

/** Discord's markdown as the chat shows it: the adapter backslash-escapes markdown's characters. */
const discordShows = (markdown: string) => markdown.replace(/\\([\\*_`~|()[\]])/g, "$1");

function assertListing(shown: string) {
  assert.ok(shown.includes(`运行中（${ACTIVITY}）`), shown);
  assert.ok(shown.includes("anon.send #1 <指令>"), `the texts' own markup-like words as written: ${shown}`);
  assert.doesNotMatch(shown, ENTITIES);
}

test("Telegram: /anon_send and anon.send reach Pi's model byte-equal; anon.sessions is escaped once for parse_mode html", { timeout: 120_000 }, async (t) => {
  const chat = await startTelegramChat();
  const tg = chat.fake;
  const pi = await onlinePi(t, chat);
  const sent = (since: number, test: (shown: string) => boolean, what: string) =>
    waitUntil(() => tg.calls.slice(since).find((c) => c.method === "sendMessage" && test(telegramShows(String(c.body.text)))), what, 30_000);

  for (const typed of [`/anon_send #1 ${TYPED}`, `anon.send #1 ${TYPED}`]) {
    const since = tg.calls.length;
    const read = await modelReads(pi, async () => {
      await tg.privateMessage(TELEGRAM_OWNER, typed);
      await sent(since, (shown) => shown.startsWith("已排队给 #1"), "the queued reply");
    });
    assert.equal(read, TYPED, typed);
  }

  await agentApi(chat).heartbeat({ project: "shop", state: "running", activity: ACTIVITY });
  for (const typed of ["anon.sessions", "/anon_sessions"]) {
    const since = tg.calls.length;
    await tg.privateMessage(TELEGRAM_OWNER, typed);
    const listing = await sent(since, (shown) => shown.includes("#2"), `the listing for ${typed}`);
    assert.equal(listing.body.parse_mode, "html");
    assert.equal(String(listing.body.chat_id), String(TELEGRAM_OWNER.id));
    assertListing(telegramShows(listing.body.text));
  }
});

test("Discord: anon.send typed and /anon send reach Pi's model byte-equal; anon.sessions carries no HTML entities", { timeout: 120_000 }, async (t) => {
  const chat = await startDiscordChat();
  const dc = chat.fake;
  const registered = await dc.waitFor("PUT", new RegExp(`^/applications/${dc.applicationId}/commands$`), "the slash commands");
  const pi = await onlinePi(t, chat);
  const dm = dc.dmChannel(DISCORD_OWNER.id);
  const posted = (since: number, path: string, test: (content: string) => boolean, what: string) =>
    waitUntil(() => dc.calls.slice(since).find((c) => c.method === "POST" && c.path === path && test(discordShows(String(c.body?.content)))), what, 30_000);

  let since = dc.calls.length;
  const typed = await modelReads(pi, async () => {
    await dc.directMessage(DISCORD_OWNER, `anon.send #1 ${TYPED}`);
    await posted(since, `/channels/${dm}/messages`, (c) => c.startsWith("已排队给 #1"), "the queued reply");
  });
  assert.equal(typed, TYPED, "typed as a message");

  const send = (registered.body as { name: string; options: { name: string; options?: { name: string }[] }[] }[])
    .find((c) => c.name === "anon")!
    .options.find((o) => o.name === "send")!;
  const [session, instruction] = (send.options ?? []).map((o) => o.name);
  assert.deepEqual([session, instruction], ["session", "instruction"], "the slash command's options");
  since = dc.calls.length;
  const slashed = await modelReads(pi, async () => {
    const token = await dc.slash(DISCORD_OWNER, "anon", "send", [
      { name: session!, value: "#1" },
      { name: instruction!, value: TYPED },
    ]);
    await posted(since, `/webhooks/${dc.applicationId}/${token}`, (c) => c.startsWith("已排队给 #1"), "the slash command's follow-up");
  });
  assert.equal(slashed, TYPED, "sent as /anon send");

  await agentApi(chat).heartbeat({ project: "shop", state: "running", activity: ACTIVITY });
  since = dc.calls.length;
  await dc.directMessage(DISCORD_OWNER, "anon.sessions");
  const listing = await posted(since, `/channels/${dm}/messages`, (c) => c.includes("#2"), "the listing");
  assertListing(discordShows(listing.body.content));
});

/** The Discord adapter's own reading of a message object, without fetching what it quotes. */
const adapterDecode = (
  createRequire(import.meta.url)("@satorijs/adapter-discord") as {
    Discord: { decodeMessage(bot: object, data: object, message: object, payload: null, details: false): Promise<{ content: string }> };
  }
).Discord.decodeMessage;

/** Text people type on Discord: markup-like words between Discord's own mentions, channels and emoji. */
const discordTyped = fc.array(
  fc.oneof(
    fc.record({ text: markupText }),
    fc.record({ token: fc.constantFrom(`<@${DISCORD_OWNER.id}>`, `<@!${DISCORD_OWNER.id}>`, "<@&500>", "<#600>", "<:smile:700>", "@everyone", "@here") }),
  ),
  { minLength: 1, maxLength: 6 },
);

test("Discord's text, generated: read back as typed, with the adapter's own elements for its mentions, channels and emoji", async () => {
  const { h } = koishi;
  const message = (content: string) => ({ content, mentions: [{ id: DISCORD_OWNER.id, username: "owner" }], mention_roles: ["500"], mention_channels: [] });
  const adapted = async (content: string) =>
    (await adapterDecode({ platform: "discord" }, { ...message(content), attachments: [], embeds: [] }, {}, null, false)).content;
  await fc.assert(
    fc.asyncProperty(discordTyped, async (parts) => {
      const content = parts.map((p) => ("text" in p ? p.text : p.token)).join("");
      // The adapter's own decoder throws on some stray closing tags ('</ <x>' beside a mention): no message to rebuild then.
      const decoded = await adapted(content).catch(() => undefined);
      if (decoded === undefined) return;
      const markup = discordMarkup(message(content) satisfies DiscordText, decoded);
      // Beside a token, a `<` or `:` in the text can make the adapter read the token otherwise
      // (`<` + `@here…>` as a mention, an emoji's name up to the last colon, two emoji as one): its reading stands then.
      const emoji = parts.filter((p) => "token" in p && p.token.startsWith("<:")).length;
      const plain = parts.every((p) => "text" in p) || (emoji < 2 && parts.every((p) => "token" in p || !/[<:]/.test(p.text)));
      if (markup === undefined && !plain) return;
      assert.ok(markup !== undefined, content);
      const elements = h.parse(markup);
      const texts = parts.flatMap((p) => ("text" in p ? [p.text] : []));
      assert.equal(
        elements
          .filter((e) => e.type === "text")
          .map((e) => e.attrs.content)
          .join(""),
        texts.join(""),
        content,
      );
      const tokens = await Promise.all(parts.flatMap((p) => ("token" in p ? [adapted(p.token)] : [])));
      assert.deepEqual(
        elements.filter((e) => e.type !== "text").map(String),
        tokens.flatMap((t) => h.parse(t).map(String)),
        content,
      );
    }),
    { numRuns: 300, seed: 1909331766 },
  );
});
