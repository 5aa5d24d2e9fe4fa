import assert from "node:assert/strict";
import test from "node:test";
import fc from "fast-check";
import { mixesScripts, sameName, shownName } from "../../common/shown-name.ts";

/** What no shown name may hold: a line break of any kind, a bidi control, a zero-width or other format character. */
const BREAKS_OR_HIDDEN = /[\n\r\v\f\u0085\u2028\u2029\p{Cf}\p{Cc}]/u;

test("shownName: no output holds a line break, a bidi control or a zero-width character (generated)", () => {
  // Names built mostly from the characters that fool a reader, with any other code point between them.
  const tricky = fc.constantFrom(
    "\n",
    "\r",
    "\u2028",
    "\u2029",
    "\u0085",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u061c",
    "#2 ",
    "ѕ",
    "s",
    "运行中",
  );
  const name = fc.array(fc.oneof(tricky, fc.string({ unit: "binary", maxLength: 3 })), { maxLength: 40 }).map((parts) => parts.join(""));
  fc.assert(
    fc.property(name, (text) => {
      assert.doesNotMatch(shownName(text).text, BREAKS_OR_HIDDEN, JSON.stringify(text));
    }),
    { numRuns: 2000 },
  );
});

test("shownName: the forged heartbeat row stays on its own line; hidden characters are written out", () => {
  const table: [string, string, boolean][] = [
    ["a\n#2 bank · faux-model · 运行中（bash）", "a⏎#2 bank · faux-model · 运行中（bash）", false],
    ["\u202epohs", "\\u202epohs", false],
    ["sh\u200bop", "sh\\u200bop", false],
    ["\u0455hop", "\u0455hop", true],
    ["shop", "shop", false],
    ["商店-shop", "商店-shop", false],
    ["プロジェクトapp", "プロジェクトapp", false],
    ["한국app", "한국app", false],
    ["проект", "проект", false],
    ["pаypal", "pаypal", true],
    ["αβγ-abc", "αβγ-abc", true],
  ];
  for (const [input, text, mixed] of table) assert.deepEqual(shownName(input), { text, mixedScripts: mixed }, JSON.stringify(input));
});

test("mixesScripts: one script, or a combination one writing system uses, is not mixed (generated)", () => {
  const latin = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
  const cyrillic = fc.stringMatching(/^[а-я]{1,12}$/);
  fc.assert(fc.property(latin, (text) => !mixesScripts(text)));
  fc.assert(fc.property(cyrillic, (text) => !mixesScripts(text)));
  fc.assert(fc.property(latin, cyrillic, (a, b) => mixesScripts(`${a.replace(/[0-9-]/g, "") || "x"}${b}`)));
});

test("sameName: case is ignored only where it maps both ways; look-alikes are never the same name", () => {
  const table: [string, string, boolean][] = [
    ["shop", "shop", true],
    ["SHOP", "shop", true],
    ["shop", "\u0455hop", false],
    ["key", "\u212aey", false],
    ["shop", "\u017fhop", false],
    ["shop", "sh\u200bop", false],
    ["shop", "\\u202epohs", false],
    ["ПРОЕКТ", "проект", true],
  ];
  for (const [typed, name, same] of table) assert.equal(sameName(typed, name), same, `${typed} / ${name}`);
});
