/** Checking one configuration layer against the schema merged over the defaults, so every problem names
 * its file or variable and key path, with the key a typo most likely meant. */
import { z } from "zod";
import type { Language, Messages } from "../texts/messages.ts";
import { SCHEMA_CHECKS, type SchemaCheck } from "../texts/config.ts";
import { Config, DEFAULT_CONFIG } from "./schema-rules.ts";

export type Json = Record<string, unknown>;
export const isPlainObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

/** Later layers win key by key; sections merge, anything else (arrays included) is replaced. */
export function deepMerge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    out[key] = isPlainObject(value) && isPlainObject(out[key]) ? deepMerge(out[key] as Json, value) : value;
  }
  return out;
}

/** The dotted paths of a layer's values; arrays are values, as deepMerge treats them. */
export function leafPaths(value: Json, prefix = ""): string[] {
  return Object.entries(value).flatMap(([key, inner]) =>
    inner === undefined ? [] : isPlainObject(inner) ? leafPaths(inner, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

/** `value` without the key at `path` (a copy; the file's other keys untouched), or `value` itself when it has no such key. */
export function withoutKey(value: Json, path: readonly string[]): Json {
  const [key, ...rest] = path;
  if (key === undefined || !(key in value)) return value;
  const { [key]: inner, ...kept } = value;
  if (rest.length === 0) return kept;
  const next = isPlainObject(inner) ? withoutKey(inner, rest) : inner;
  return next === inner ? value : { ...value, [key]: next };
}

/** A problem worded once the language is known, so a file read before the one setting `language` is reported in it too. */
export type Problem = (m: Messages) => string | string[];

const ZOD_LOCALES: Record<Language, () => { localeError: z.core.$ZodErrorMap }> = { "zh-CN": z.locales.zhCN, "en-US": z.locales.en };
const isSchemaCheck = (value: unknown): value is SchemaCheck => (SCHEMA_CHECKS as readonly unknown[]).includes(value);

/** zod's own words in the language, and the schema's own checks (`params.text`) from the catalogue: never both concatenated. */
function errorMap(m: Messages): z.core.$ZodErrorMap {
  const locale = ZOD_LOCALES[m.language]().localeError;
  return (issue) => {
    const text: unknown = (issue as { params?: { text?: unknown } }).params?.text;
    if (isSchemaCheck(text)) return m.config.check[text];
    return issue.code === "invalid_format" && issue.format === "url" ? m.config.check.httpUrl : locale(issue);
  };
}

/** The keys the schema knows at a path (array items by their element), for "did you mean". */
function knownKeys(path: readonly PropertyKey[]): string[] {
  let node: z.ZodType = Config;
  for (const part of [...path, null]) {
    if (node instanceof z.ZodOptional) node = node.unwrap() as z.ZodType;
    if (node instanceof z.ZodArray) node = node.element as z.ZodType;
    if (!(node instanceof z.ZodObject)) return [];
    if (part === null) return Object.keys(node.shape);
    if (typeof part === "number") continue;
    node = (node.shape as Record<string, z.ZodType>)[String(part)]!;
    if (!node) return [];
  }
  return [];
}

/** Edits between two keys, a swapped pair counting as one (optimal string alignment); too short a loop for a dependency. */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = best;
    }
  }
  return rows[a.length]![b.length]!;
}

/** The known key a mistyped one most likely meant, when at most a third of its letters (at least one) are off. */
export function didYouMean(key: string, known: readonly string[]): string | null {
  const scored = known.map((name) => ({ name, edits: editDistance(key.toLowerCase(), name.toLowerCase()) })).sort((x, y) => x.edits - y.edits);
  const best = scored[0];
  return best && best.edits <= Math.max(1, Math.floor(best.name.length / 3)) ? best.name : null;
}

/** Checks one layer on its own, merged over the defaults, so every problem names the file or variable (`where`) and the key path. */
export function layerProblems(layer: Json, where: (m: Messages) => string): Problem[] {
  const merged = deepMerge(DEFAULT_CONFIG as unknown as Json, layer);
  if (Config.safeParse(merged).success) return [];
  return [
    (m) => {
      const result = Config.safeParse(merged, { error: errorMap(m) });
      if (result.success) return [];
      return result.error.issues.flatMap((issue) => {
        const at = issue.path.map(String).join(".");
        if (issue.code === "unrecognized_keys") {
          const known = knownKeys(issue.path);
          return issue.keys.map((key) => {
            const suggestion = didYouMean(key, known);
            return m.config.unknownKey(where(m), `${at ? `${at}.` : ""}${key}`, suggestion && `${at ? `${at}.` : ""}${suggestion}`);
          });
        }
        return [m.config.invalid(where(m), at || m.config.root, issue.message)];
      });
    },
  ];
}
