/** The plugin's texts, one YAML file per language registered with Koishi's i18n; parsed with js-yaml because
 * this package is compiled with tsc, not Koishi's bundler. */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Context, Session } from "koishi";
import { z } from "zod";
import { FAILURE_WORDS } from "../../common/failure-words.ts";

export const LOCALES = ["zh-CN", "en-US"] as const;
export type Locale = (typeof LOCALES)[number];

export type LocaleTree = { [key: string]: string | LocaleTree };
const LocaleTree: z.ZodType<LocaleTree> = z.lazy(() => z.record(z.string(), z.union([z.string(), LocaleTree])));

const yaml = createRequire(import.meta.url)("js-yaml") as { load(text: string): unknown };

export function readLocale(locale: Locale): LocaleTree {
  const text = readFileSync(new URL(`./${locale}.yml`, import.meta.url), "utf8");
  const tree = LocaleTree.parse(yaml.load(text));
  const said = (tree["anon-notify"] as LocaleTree | undefined)?.said;
  if (typeof said !== "object") throw new Error(`${locale}.yml has no anon-notify.said`);
  said.failure = { ...FAILURE_WORDS[locale] };
  return tree;
}

const parsed = new Map<Locale, LocaleTree>();
const cachedLocale = (locale: Locale) => parsed.get(locale) ?? parsed.set(locale, readLocale(locale)).get(locale)!;

/** One Config section's descriptions in every language (`_config.<section>`), for `Schema.i18n`. */
export function configDescriptions(section: string): Record<Locale, LocaleTree> {
  const entries = LOCALES.map((locale) => {
    const texts = (cachedLocale(locale)._config as LocaleTree | undefined)?.[section];
    if (typeof texts !== "object") throw new Error(`${locale}.yml has no _config.${section}`);
    return [locale, texts] as const;
  });
  return Object.fromEntries(entries) as Record<Locale, LocaleTree>;
}

/** The help on the plugin's config page (`_usage`): Koishi takes `usage` as one markdown string, so one language at a time. */
export function usageText(locale: Locale): string {
  const text = cachedLocale(locale)._usage;
  if (typeof text !== "string") throw new Error(`${locale}.yml has no _usage`);
  return text;
}

/** Our language a Koishi locale tag is, or is the base of (`en` → `en-US`); undefined for any other tag. */
function oursFor(tag: string): Locale | undefined {
  return LOCALES.find((locale) => locale === tag || locale.split("-")[0] === tag);
}

/** The instance's language among ours: the first in Koishi's fallback order (its `i18n.locales`) that one of ours is or belongs to. */
export function instanceLocale(ctx: Context): Locale {
  return (
    ctx.i18n
      .fallback([])
      .map(oursFor)
      .find((ours) => ours !== undefined) ?? LOCALES[0]
  );
}

/** Registers every language for as long as `ctx` lives, Chinese first. Koishi looks texts up only under its own `i18n.locales` and their parents, so a
 * bare `en` or `en-GB` instance also gets our `en-US`. */
export function defineLocales(ctx: Context): void {
  const trees = new Map(LOCALES.map((locale) => [locale, readLocale(locale)] as const));
  for (const [locale, tree] of trees) ctx.i18n.define(locale, tree);
  for (const tag of ctx.i18n.fallback([])) {
    const ours = oursFor(tag);
    if (ours && ours !== tag) ctx.i18n.define(tag, trees.get(ours)!);
  }
}

/** One text by its locale path, rendered as plain text: how pure code that words things is given a language. */
export type Say = (path: string, params?: object) => string;

/** A count in words: `<path>.<category>` chosen by `Intl.PluralRules`, with `{n}` the number. */
export function countText(say: Say, path: string, n: number): string {
  return say(`${path}.${new Intl.PluralRules(say("anon-notify.locale")).select(n)}`, { n });
}

function plain(elements: { toString(strip: boolean): string }[]): string {
  return elements.map((element) => element.toString(true)).join("");
}

/** `Say` outside any chat session (log lines, messages the server starts), in the instance's language. */
export function instanceSay(ctx: Context): Say {
  return (path, params = {}) => plain(ctx.i18n.render([], [path], params));
}

export function instanceText(ctx: Context, path: string, params: object): string {
  return instanceSay(ctx)(path, params);
}

/** `Say` in a chat session's language: the user's, then the channel's, then the instance's, as Koishi picks. */
export function sessionSay(session: Session): Say {
  return (path, params = {}) => plain(session.i18n(path, params));
}
