/** The `[EXTERNAL_AUTOMATION_EVENT]` block: one field per line as compact JSON, with every look-alike of the
 * markers and every `{{` written as `\u` escapes, so agent text can neither end the block nor fake one. */
import type { EventBody } from "../../protocol/events.ts";

export const OPEN_MARKER = "[EXTERNAL_AUTOMATION_EVENT]";
export const CLOSE_MARKER = "[/EXTERNAL_AUTOMATION_EVENT]";

/** What the persona sees of an event: everything it may reason about, nothing internal. */
export function blockPayload(event: EventBody, receivedAt: string) {
  const { event_id, session_id, source, task, status, summary, context_usage, details, url, created_at } = event;
  return { event_id, session_id, source, task, status, summary, context_usage, details, url, created_at, received_at: receivedAt };
}

/** `fold` gives a reader's skeleton of the text: NFKD, invisibles dropped, look-alike letters and digits mapped to Latin, separators to `_`, upper case.
 * Only the 14 letters of the marker name need look-alikes, so a small table suffices. */
const INVISIBLE = /^[\p{Cf}\p{Cc}\p{M}]$/u;
/** Cyrillic and Greek letters, and digits, drawn like the Latin letters of the marker name (NFKD leaves them apart). */
const LOOK_ALIKES: Readonly<Record<string, string>> = Object.fromEntries(
  "АA ВB ЕE КK МM НH ОO РP СC ТT ХX УY ІI ЈJ ЅS ӀI аa еe оo рp сc хx уy іi јj ѕs ӏl ԁd һh ΑA ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX αa εe ιi κk νv οo ρp τt υu χx ıi 0O 1I |I ƖI ǀI"
    .split(" ")
    .map((pair) => [pair[0], pair[1]]),
);
/** What a reader takes for an underscore between letters: spaces, every dash, the minus sign, middle dots, `/`, `:`, `+`, `.`, and other low lines. */
const SEPARATOR = /^[\s_\p{Pd}\u2212\u00b7\u30fb\u2027\u2219\u22c5/:+.\u203f\u2040\u2581\u02cd]$/u;
/** Between any two letters of the name: nothing, separators, or an underscore or space written as `%5F`, `%20`, `&#95;`, `&#x5F;` (digits already folded). */
const GAP = "(?:_|%5F|%2[0O]|&#[0O]*95;|&#X[0O]*5F;)*";
const MARKER_NAME = new RegExp(["EXTERNAL", "AUTOMATION", "EVENT"].map((word) => [...word].join(GAP)).join(GAP), "g");

/** How a reader sees one character: plain upper-case Latin, `_` for a separator, or nothing at all. */
function fold(char: string): string {
  let seen = "";
  for (const part of char.normalize("NFKD")) {
    if (INVISIBLE.test(part)) continue;
    seen += SEPARATOR.test(part) ? "_" : (LOOK_ALIKES[part] ?? part);
  }
  return seen.toUpperCase();
}

/** A character as written in the text (`raw`) and the one it stands for (a JSON escape sequence decoded). */
type Piece = { raw: string; char: string };

const JSON_ESCAPES: Readonly<Record<string, string>> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", '"': '"', "\\": "\\", "/": "/" };

/** JSON text as characters, each escape sequence one piece standing for the character it means. */
function jsonPieces(json: string): Piece[] {
  const pieces: Piece[] = [];
  for (let i = 0; i < json.length; ) {
    if (json[i] === "\\") {
      const raw = json[i + 1] === "u" ? json.slice(i, i + 6) : json.slice(i, i + 2);
      const char = json[i + 1] === "u" ? String.fromCharCode(Number.parseInt(raw.slice(2), 16)) : (JSON_ESCAPES[json[i + 1]!] ?? json[i + 1]!);
      pieces.push({ raw, char });
      i += raw.length;
    } else {
      const char = String.fromCodePoint(json.codePointAt(i)!);
      pieces.push({ raw: char, char });
      i += char.length;
    }
  }
  return pieces;
}

const unicodeEscape = (char: string) => Array.from({ length: char.length }, (_, i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`).join("");

function markerPieces(pieces: readonly Piece[]): Set<number> {
  let seen = "";
  const owner: number[] = [];
  pieces.forEach((piece, index) => {
    const folded = fold(piece.char);
    seen += folded;
    for (let k = 0; k < folded.length; k++) owner.push(index);
  });
  const found = new Set<number>();
  for (const match of seen.matchAll(MARKER_NAME)) {
    for (let index = owner[match.index]!; index <= owner[match.index + match[0].length - 1]!; index++) found.add(index);
  }
  return found;
}

/** The pieces with each one of a marker name escaped as `\uXXXX`, or undefined when there is none; the name never includes a quote or comma, so
 * JSON so rewritten parses to the same value. */
function rewritten(pieces: readonly Piece[]): string | undefined {
  const found = markerPieces(pieces);
  return found.size === 0 ? undefined : pieces.map((piece, index) => (found.has(index) ? unicodeEscape(piece.char) : piece.raw)).join("");
}

/** `value` with every string defused the same way, for objects handed on as objects (YesImBot's event payload). */
export function withoutMarkers(value: unknown): unknown {
  if (typeof value === "string") return rewritten([...value].map((char) => ({ raw: char, char }))) ?? value;
  if (Array.isArray(value)) return value.map(withoutMarkers);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, item]) => [withoutMarkers(key), withoutMarkers(item)]));
  return value;
}

export function buildEventBlock(event: EventBody, receivedAt: string): string {
  return markedBlock(blockPayload(event, receivedAt));
}

/** Outside text as marked data, for the persona (a notice) and for Pi (a trigger's delivery) alike. */
export function markedBlock(payload: Record<string, unknown>): string {
  const fields = Object.entries(payload).map(([key, value]) => `  ${JSON.stringify(key)}: ${JSON.stringify(value)}`);
  const json = `{\n${fields.join(",\n")}\n}`;
  // Pretty-printed JSON never puts two braces side by side, so every `{{` is inside a string value.
  return `${OPEN_MARKER}\n${(rewritten(jsonPieces(json)) ?? json).replace(/\{(?=\{)/g, "\\u007b")}\n${CLOSE_MARKER}`;
}
