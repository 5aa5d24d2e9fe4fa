/**
 * Writes `config.schema.json`, the JSON Schema of the extension's config files, from the one zod
 * schema (`extension/config/schema-rules.ts`), so editors complete and check `anon-notify.json`.
 * `npm run config-schema` after a change to the schema; test/extension/config-schema.test.ts fails
 * while the committed file differs from what this generates.
 *
 * A config file is one layer over the defaults, so every key is optional (arrays' items, such as a
 * user rule, keep their required keys); each default is given for editors to show. The checks zod
 * runs in code (paths, templates, regular expressions) have no JSON Schema form: the loader still
 * reports them.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { Config, DEFAULT_CONFIG } from "../extension/config/schema-rules.ts";

export const CONFIG_SCHEMA_FILE = join(import.meta.dirname, "..", "config.schema.json");

/** Defaults that differ per platform, so the file stays the same wherever it is generated. */
const PLATFORM_DEFAULTS = new Set(["sink.socket", "sink.tokenFile"]);

type Node = { type?: string; properties?: Record<string, Node>; required?: string[]; default?: unknown; [key: string]: unknown };

/** Every key optional along the objects from the root, each with its default. */
function asLayer(node: Node, defaults: unknown, path: string[]): Node {
  if (node.type !== "object" || !node.properties) {
    const key = path.join(".");
    return defaults === undefined || PLATFORM_DEFAULTS.has(key) ? node : { ...node, default: defaults };
  }
  const { required: _required, properties, ...rest } = node;
  const values = (defaults ?? {}) as Record<string, unknown>;
  return {
    ...rest,
    properties: Object.fromEntries(Object.entries(properties).map(([key, child]) => [key, asLayer(child, values[key], [...path, key])])),
  };
}

export function configJsonSchema(): string {
  const generated = z.toJSONSchema(Config, { io: "input", unrepresentable: "any" }) as Node;
  const layer = asLayer(generated, DEFAULT_CONFIG, []);
  const schema = {
    $schema: layer.$schema,
    title: "anon-notify config (a layer over the defaults)",
    ...layer,
    properties: { $schema: { type: "string", description: "Where an editor finds this schema; not a setting." }, ...layer.properties },
  };
  return `${JSON.stringify(schema, null, 2)}\n`;
}

if (import.meta.main) {
  writeFileSync(CONFIG_SCHEMA_FILE, configJsonSchema());
  console.log(`wrote ${CONFIG_SCHEMA_FILE}`);
}
