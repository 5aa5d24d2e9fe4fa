/** The chat's words in the session's language, and `reply`, the one place text becomes a message (escaped once). */
import type { Fragment, Session } from "koishi";
import { sessionSay } from "../locales/load.ts";
import { koishi } from "../koishi.ts";

/** One of the plugin's texts for `session` as plain text: parameters go in as they are, nothing escaped. */
export const say = (session: Session, path: string, params?: object): string => sessionSay(session)(path, params);

/** What a command or reply answers: `text` as one text element; an empty answer sends nothing. */
export const reply = (text: string): Fragment => (text ? koishi.h.text(text) : "");
