/** A delivered instruction inside the Pi session: a custom message the model reads as user content (text,
 * then images), its ids in `details`; with a TUI renderer, because Pi's default shows no images. */
import type { ImageContent, TextContent } from "@earendil-works/pi-ai";
import type { MessageRenderer } from "@earendil-works/pi-coding-agent";
import { Box, Container, Image, Spacer, Text } from "@earendil-works/pi-tui";
import { z } from "zod";
import { CommandOrigin, type ClaimedCommand } from "../../protocol/queue.ts";
import { Id } from "../../protocol/wire.ts";
import type { Messages } from "../texts/messages.ts";

export const COMMAND_MESSAGE_TYPE = "anon-notify:command";

export const CommandDetails = z.object({
  command_id: Id,
  event_id: Id,
  session_id: Id,
  origin: CommandOrigin,
});
export type CommandDetails = z.infer<typeof CommandDetails>;

export interface CommandMessage {
  customType: typeof COMMAND_MESSAGE_TYPE;
  content: string | (TextContent | ImageContent)[];
  display: true;
  details: CommandDetails;
}

/** Without images the content stays the plain instruction string, as the specification says. */
export function commandMessage(command: ClaimedCommand, sessionId: string): CommandMessage {
  const images = command.images.map((image) => ({ type: "image" as const, data: image.data, mimeType: image.mime_type }));
  const content = images.length === 0 ? command.instruction : [{ type: "text" as const, text: command.instruction }, ...images];
  return {
    customType: COMMAND_MESSAGE_TYPE,
    content,
    display: true,
    details: { command_id: command.command_id, event_id: command.event_id, session_id: sessionId, origin: command.origin },
  };
}

/** The instruction text of a delivered message, whatever shape its content has. */
export function instructionText(content: CommandMessage["content"]): string {
  if (typeof content === "string") return content;
  return content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("\n");
}

/** Label, instruction and each image (Pi's image component falls back to text where the terminal cannot draw). */
export const commandMessageRenderer =
  (text: () => Messages): MessageRenderer =>
  (message, { outputPad }, theme) => {
    const label = text().commands.label[CommandDetails.safeParse(message.details).data?.origin ?? "anon"];
    const box = new Box(outputPad, 1, (line) => theme.bg("customMessageBg", line));
    box.addChild(new Text(theme.fg("customMessageLabel", theme.bold(`[${label}]`)), 0, 0));
    box.addChild(new Spacer(1));
    box.addChild(new Text(theme.fg("customMessageText", instructionText(message.content)), 0, 0));
    const container = new Container();
    container.addChild(box);
    if (typeof message.content !== "string") {
      for (const block of message.content) {
        if (block.type !== "image") continue;
        container.addChild(new Spacer(1));
        container.addChild(new Image(block.data, block.mimeType, { fallbackColor: (line) => theme.fg("muted", line) }, { maxWidthCells: 60 }));
      }
    }
    return container;
  };
