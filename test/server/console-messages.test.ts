/**
 * The console page's texts (console/client/messages.ts): both languages have the same keys and the
 * same placeholders, and no text holds a character vue-i18n would read as syntax (an `@` starts a
 * linked message and cut the sign-in sentence short once; `|` splits plurals).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import messages from "../../console/client/messages.ts";
import { countKey } from "../../console/client/format.ts";

type Tree = { [key: string]: string | Tree };

function leaves(tree: Tree, prefix = ""): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of Object.entries(tree)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (typeof value === "string") out.set(path, value);
    else for (const [inner, text] of leaves(value, path)) out.set(inner, text);
  }
  return out;
}

/** Named placeholders, without vue-i18n's literal interpolations such as `{'@'}`. */
function placeholders(text: string): string[] {
  return [...text.matchAll(/\{\s*([A-Za-z_]\w*)\s*\}/g)].map((match) => match[1]!).sort();
}

test("the page's zh-CN and en-US texts have the same keys and the same placeholders", () => {
  const zh = leaves(messages["zh-CN"] as Tree);
  const en = leaves(messages["en-US"] as Tree);
  assert.deepEqual([...en.keys()].sort(), [...zh.keys()].sort());
  for (const [key, text] of zh) assert.deepEqual(placeholders(en.get(key)!), placeholders(text), key);
});

test("no text holds a bare @ or | that vue-i18n would read as a linked message or a plural", () => {
  for (const language of ["zh-CN", "en-US"] as const) {
    for (const [key, text] of leaves(messages[language] as Tree)) {
      const bare = text.replace(/\{'[^']*'\}/g, "");
      assert.doesNotMatch(bare, /[@|]/, `${language} ${key}: ${text}`);
    }
  }
});

test("the page's counts read right in each language through the locale's plural rules: 1 notice held, 2 notices", () => {
  for (const [locale, expected] of [
    ["en-US", ["1 notice held", "2 notices held", "1 session muted", "3 sessions muted", "used 1 time", "used 4 times"]],
    ["zh-CN", ["已暂存 1 条通知", "已暂存 2 条通知", "1 个会话静音中", "3 个会话静音中", "已用 1 次", "已用 4 次"]],
  ] as const) {
    const texts = leaves(messages[locale] as Tree);
    const say = (key: string, n: number) => texts.get(countKey(key, n, locale))!.replace("{n}", String(n));
    assert.deepEqual([say("held", 1), say("held", 2), say("mutedSome", 1), say("mutedSome", 3), say("grants.uses", 1), say("grants.uses", 4)], expected);
  }
});
