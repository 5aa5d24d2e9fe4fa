/**
 * The plugin's options are described in both languages (Schema.i18n), so Koishi's console and
 * market show them in the reader's; the config page's help (`usage`, one string for Koishi) and the
 * persona tools are in the instance's.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as plugin from "../../server/notify-webhook.ts";
import { Config } from "../../server/notify-webhook.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { instanceText, LOCALES } from "../../server/locales/load.ts";
import { toolDefinitions } from "../../server/persona/yesimbot-tools.ts";
import { sayIn } from "./say.ts";

interface SchemaNode {
  meta: { description?: unknown };
  list?: SchemaNode[];
  dict?: Record<string, SchemaNode>;
}

const HAN = /\p{Script=Han}/u;

test("every option and every section of the Config has a description in each language, Chinese in zh-CN, none in en-US", () => {
  const sections = (Config as unknown as SchemaNode).list!;
  const described: string[] = [];
  for (const [index, section] of sections.entries()) {
    for (const [name, node] of [[`section ${index}`, section] as const, ...Object.entries(section.dict!)]) {
      const description = node.meta.description as Record<string, string> | string | undefined;
      assert.equal(typeof description, "object", `${name} is described per language: ${JSON.stringify(description)}`);
      for (const locale of LOCALES) assert.ok((description as Record<string, string>)[locale]?.trim(), `${name} in ${locale}`);
      assert.match((description as Record<string, string>)["zh-CN"]!, HAN, name);
      assert.doesNotMatch((description as Record<string, string>)["en-US"]!, HAN, name);
      described.push(name);
    }
  }
  assert.ok(described.length > 40, `${described.length} descriptions`);
});

test("the persona tools are described to the model in the instance's language, every parameter included", () => {
  for (const locale of LOCALES) {
    const definitions = toolDefinitions(
      { operator: {} as never, approvals: {} as never, owner: { botId: "mock:514", recipientId: "10001" } as never },
      "r-1",
      sayIn(locale),
    );
    assert.equal(definitions.length, 6);
    for (const definition of definitions) {
      const parameters = Object.values((definition.parameters as unknown as SchemaNode).dict ?? {}).map((node) => String(node.meta.description ?? ""));
      for (const text of [definition.description, ...parameters]) {
        assert.ok(text.trim(), `${definition.name} in ${locale}`);
        if (locale === "en-US") assert.doesNotMatch(text, HAN, `${definition.name}: ${text}`);
        assert.doesNotMatch(text, /anon-notify\.persona-tools/, "no missing text shown by its key");
      }
      if (locale === "zh-CN") assert.match(definition.description, HAN, definition.name);
    }
  }
});

test("the config page's help is the instance's language once the plugin runs, with no Chinese in English", { timeout: 60_000 }, async (t) => {
  const rows: [string[], RegExp, RegExp][] = [
    [["en-US", "zh-CN"], /^Receives the lifecycle events of Pi agents/, /- Route prefix: `\/api\/agent-notify\/v1`/],
    [["en"], /^Receives the lifecycle events of Pi agents/, /`GET \/operator\/audit`/],
    [["zh-CN", "en-US"], /^接收 Pi Agent（anon-notify 扩展）的生命周期事件/, /- 接口前缀：`\/api\/agent-notify\/v1`/],
  ];
  for (const [locales, opening, line] of rows) {
    const koishi = await startKoishi({ locales });
    t.after(koishi.stop);
    assert.match(plugin.usage, opening, locales.join());
    assert.match(plugin.usage, line, locales.join());
    if (locales[0]!.startsWith("en")) assert.doesNotMatch(plugin.usage, HAN);
    await koishi.stop();
  }
});

test("an instance set to a bare language or another region of ours words its log in that language, never as raw keys", { timeout: 60_000 }, async (t) => {
  const rows: [string[], string][] = [
    [["en"], "en-US"],
    [["en-GB"], "en-US"],
    [["zh"], "zh-CN"],
    [["zh-TW", "en-US"], "zh-CN"],
  ];
  for (const [locales, expected] of rows) {
    const koishi = await startKoishi({ locales });
    t.after(koishi.stop);
    assert.equal(instanceText(koishi.app, "anon-notify.locale", {}), expected, locales.join());
    const line = instanceText(koishi.app, "anon-notify.notices.start-none", {});
    assert.doesNotMatch(line, /anon-notify\./, `${locales.join()}: ${line}`);
    if (expected === "en-US") assert.doesNotMatch(line, HAN, line);
    else assert.match(line, HAN, line);
    await koishi.stop();
  }
});
