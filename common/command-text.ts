/** A command as a person reads it before approving it: one line where every control, bidi or invisible character is written out, so nothing a command holds can
 * start a line, reorder or hide text. Lengths are UTF-16 code units, as the wire counts them; a surrogate pair is never split. */

/** Written out: controls, format characters (bidi, zero-width, BOM, soft hyphen), line and paragraph separators, surrogates, private-use and unassigned
 * code points, whitespace but the space, and `⏎` itself. */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\u23ce]|[^\S ]/u;

const hex = (code: number, width: number) => code.toString(16).padStart(width, "0");

function visible(char: string): string {
  if (!HIDDEN.test(char)) return char;
  const code = char.codePointAt(0)!;
  if (char === "\n") return "⏎";
  if (char === "\t") return "\\t";
  if (char === "\r") return "\\r";
  if (code <= 0xff) return `\\x${hex(code, 2)}`;
  if (code <= 0xffff) return `\\u${hex(code, 4)}`;
  return `\\u{${hex(code, 1)}}`;
}

export function visibleControls(text: string): string {
  let out = "";
  for (const char of text) out += visible(char);
  return out;
}

/** Where hidden characters were left out; the same mark in every language (the caller says what it means). */
export const hiddenMark = (count: number) => ` ⟦…${count}…⟧ `;

/** At most `maxChars` units of `text` from its head or tail, whole code points only, each measured by `measure`. */
function take(chars: readonly string[], maxChars: number, from: "head" | "tail", measure: (char: string) => number): number {
  let used = 0;
  let count = 0;
  for (let i = 0; i < chars.length; i++) {
    const char = chars[from === "head" ? i : chars.length - 1 - i]!;
    const size = measure(char);
    if (used + size > maxChars) break;
    used += size;
    count++;
  }
  return count;
}

/** Head and tail of `text` with the mark of how many units were left out, within `maxChars`; the text itself when it fits. */
function cut(text: string, maxChars: number, render: (char: string) => string): { text: string; hiddenChars: number } {
  const chars = Array.from(text);
  const shown = chars.map(render);
  const whole = shown.join("");
  if (whole.length <= maxChars) return { text: whole, hiddenChars: 0 };
  // The mark's own length depends on the count; the longest count it can have bounds it.
  const budget = Math.max(0, maxChars - hiddenMark(text.length).length);
  const lengths = new Map(chars.map((char, i) => [char, shown[i]!.length]));
  const measure = (char: string) => lengths.get(char)!;
  const head = take(chars, Math.ceil(budget / 2), "head", measure);
  const tail = Math.min(take(chars, Math.floor(budget / 2), "tail", measure), chars.length - head);
  const hidden = chars.slice(head, chars.length - tail).join("").length;
  return { text: shown.slice(0, head).join("") + hiddenMark(hidden) + shown.slice(chars.length - tail).join(""), hiddenChars: hidden };
}

/** The display form of a command: `visibleControls`, and past `maxChars` its head and tail with the hidden count between. */
export function commandPreview(command: string, maxChars: number): { text: string; hiddenChars: number } {
  return cut(command, maxChars, visible);
}

export function cutCommand(command: string, maxChars: number): { command: string; hiddenChars: number } {
  const { text, hiddenChars } = cut(command, maxChars, (char) => char);
  return { command: text, hiddenChars };
}
