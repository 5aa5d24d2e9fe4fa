/** The shipped JSON Schema of the config files is what the zod schema says now, and reads as a layer. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { CONFIG_SCHEMA_FILE, configJsonSchema } from "../../scripts/config-schema.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";

test("config.schema.json is what `npm run config-schema` generates from the zod schema now", () => {
  assert.equal(readFileSync(CONFIG_SCHEMA_FILE, "utf8"), configJsonSchema(), "run `npm run config-schema` and commit config.schema.json");
});

type Node = { type?: string; properties?: Record<string, Node>; required?: string[]; items?: Node; default?: unknown; additionalProperties?: boolean };

test("every setting is optional, strict and carries its default (but the per-platform sink paths); a user rule keeps its required keys", () => {
  const schema = JSON.parse(configJsonSchema()) as Node;
  const leaves: [string[], unknown][] = [];
  const walk = (node: Node, defaults: unknown, path: string[]) => {
    if (node.type === "object" && node.properties) {
      assert.equal(node.required, undefined, `${path.join(".") || "the root"} requires nothing`);
      assert.equal(node.additionalProperties, false, `${path.join(".") || "the root"} refuses unknown keys`);
      for (const [key, child] of Object.entries(node.properties)) walk(child, (defaults as Record<string, unknown> | undefined)?.[key], [...path, key]);
    } else if (defaults !== undefined) leaves.push([path, node.default]);
  };
  walk(schema, DEFAULT_CONFIG, []);
  assert.ok(leaves.length > 40, `every setting walked (${leaves.length})`);
  for (const [path, value] of leaves) {
    const key = path.join(".");
    if (key === "sink.socket" || key === "sink.tokenFile") assert.equal(value, undefined, `${key} differs per platform`);
    else
      assert.deepEqual(
        value,
        path.reduce<unknown>((at, part) => (at as Record<string, unknown>)[part], DEFAULT_CONFIG),
        key,
      );
  }
  assert.deepEqual(schema.properties!.approval!.properties!.rules!.items!.required, ["id", "tool"]);
});
