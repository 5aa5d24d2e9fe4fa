/**
 * Koishi's runtime values, taken from its CommonJS build. Koishi 4.18's ES module entry cannot be
 * imported by Node (its loader default-imports a CommonJS module and gets the exports object), and
 * mixing both builds would give two copies of cordis with services that do not see each other.
 * Types still come from `import type … from 'koishi'`.
 */
import { createRequire } from "node:module";
import type * as KoishiModule from "koishi";

export const koishi = createRequire(import.meta.url)("koishi") as typeof KoishiModule;
