/** Images the owner attached, fetched with Koishi's `http` and turned into command images; only what can
 * never pass the queue's checks is refused early. */
import type { Context, Session } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { CommandImage } from "../../protocol/queue.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { decodeImage } from "../queue/decisions.ts";
import { koishi } from "../koishi.ts";
import { ChatRefusal } from "./kit.ts";
import { say } from "./words.ts";

const MIB = 1024 * 1024;

/** The `src` of every image element of the message, in order. */
export function imageSources(session: Session): string[] {
  return koishi.h
    .select(session.elements ?? [], "img")
    .map((element) => String(element.attrs.src ?? ""))
    .filter(Boolean);
}

export async function fetchImages(ctx: Context, session: Session, sources: readonly string[]): Promise<CommandImage[]> {
  if (sources.length > LIMITS.imagesPerCommand) throw new ChatRefusal(say(session, "anon-notify.images.too-many", [LIMITS.imagesPerCommand]));
  if (sources.length > 0 && !ctx.http) throw new ChatRefusal(say(session, "anon-notify.images.no-http"));
  const images: CommandImage[] = [];
  for (const src of sources) {
    let bytes: Buffer;
    try {
      bytes = Buffer.from(await ctx.http.get<ArrayBuffer>(src, { responseType: "arraybuffer" }));
    } catch (error) {
      throw new ChatRefusal(say(session, "anon-notify.images.fetch-failed", [errorText(error).slice(0, 120)]));
    }
    if (bytes.length > LIMITS.imageBytes) throw new ChatRefusal(say(session, "anon-notify.images.too-large", [LIMITS.imageBytes / MIB]));
    const decoded = decodeImage(bytes);
    if (!decoded.ok) throw new ChatRefusal(say(session, "anon-notify.images.not-image"));
    images.push({ mime_type: decoded.mime, data: bytes.toString("base64") });
  }
  return images;
}

/** The instruction's words without the markup of attached elements (images, mentions). */
export function plainText(content: string): string {
  return koishi.h
    .parse(content)
    .filter((element) => element.type === "text")
    .map((element) => String(element.attrs.content ?? ""))
    .join("")
    .trim();
}
