/** Which installed package this code runs from; both ship the same server, so both names count. */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

export const PACKAGE_NAMES: readonly string[] = ["@cr1ms0n/anon-notify", "@cr1ms0n/koishi-plugin-notify-webhook"];

export interface PackageRoot {
  dir: string;
  version: string;
}

/** The nearest folder at or above `from` whose package.json names one of this code's packages. */
export function packageRoot(from: string): PackageRoot | undefined {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (manifest.name && PACKAGE_NAMES.includes(manifest.name)) return { dir, version: manifest.version ?? "unknown" };
    } catch {
      // not at this level
    }
  }
  return undefined;
}
