/** Discord's adapter hands message text to Koishi as unescaped markup (`<Header>` reads as a tag), so every
 * plugin gets the text back as the platform gave it. */
import type { Context } from "koishi";
import { koishi } from "../koishi.ts";

/** The fields of Discord's message object the adapter reads for its text. */
export interface DiscordText {
  content: string;
  mentions?: { id: string; username?: string; discriminator?: string }[];
  mention_roles?: string[];
  mention_channels?: { id: string; name?: string }[];
}

/** Discord's own syntax in a message's text, which the adapter turns into elements. */
const TOKEN = /<@[!&]?(\d+)>|<(a?):(\w+):(\d+)>|<#(\d+)>|@everyone|@here/g;

/** A token as the adapter renders it. */
function element(data: DiscordText, m: RegExpExecArray): string {
  const { h } = koishi;
  const [token, mention, animated, emoji, emojiId, channel] = m;
  if (mention !== undefined) {
    if (data.mention_roles?.includes(mention)) return h("at", { role: mention }).toString();
    const user = data.mentions?.find((u) => u.id === mention || `${u.username}#${u.discriminator}` === mention);
    return h.at(mention, { name: user?.username }).toString();
  }
  if (emoji !== undefined) {
    const image = h.image(`https://cdn.discordapp.com/emojis/${emojiId}.webp?quality=lossless`);
    return h("face", { id: emojiId, name: emoji, animated: animated === "a", platform: "discord" }, [image]).toString();
  }
  if (channel !== undefined) return h.sharp(channel, { name: data.mention_channels?.find((c) => c.id === channel)?.name }).toString();
  return h("at", { type: token === "@everyone" ? "all" : "here" }).toString();
}

function rendered(data: DiscordText, text: (s: string) => string): string {
  let out = "";
  let last = 0;
  for (const m of data.content.matchAll(TOKEN)) {
    out += text(data.content.slice(last, m.index)) + element(data, m);
    last = m.index + m[0].length;
  }
  return out + text(data.content.slice(last));
}

/** The markup the adapter should have made of `data` when it made `adapted` (its text, then stickers, attachments, embeds);
 * undefined where its text is not the one recognised here or a `<` sits beside Discord's tokens: the adapter's reading stands. */
export function discordMarkup(data: DiscordText, adapted: string): string | undefined {
  const tokens = [...data.content.matchAll(TOKEN)];
  if (tokens.length > 0 && data.content.replace(TOKEN, "").includes("<")) return undefined;
  const unescaped = rendered(data, (s) => s);
  if (!adapted.startsWith(unescaped)) return undefined;
  return rendered(data, (s) => koishi.h.escape(s)) + adapted.slice(unescaped.length);
}

export function discordText(ctx: Context): void {
  ctx.on("internal/session", (session) => {
    if (session.platform !== "discord") return;
    const input = session.event._data as { t?: string; d?: Partial<DiscordText> } | undefined;
    const adapted = session.event.message?.content;
    if ((input?.t !== "MESSAGE_CREATE" && input?.t !== "MESSAGE_UPDATE") || typeof input.d?.content !== "string" || typeof adapted !== "string") return;
    const markup = discordMarkup(input.d as DiscordText, adapted);
    if (markup !== undefined && markup !== adapted) session.elements = koishi.h.parse(markup);
  });
}
