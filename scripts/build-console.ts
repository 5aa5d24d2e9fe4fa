/**
 * Builds the console page (console/client → console/dist) with the console's own build command,
 * `koishi-console build`. `--if-stale` builds only when a source file is newer than the build, so
 * `npm start` stays quick on a clone whose page is already built.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { localeLanguage } from "../common/locale.ts";

const root = join(import.meta.dirname, "..");
const client = join(root, "console", "client");
const built = join(root, "console", "dist", "index.js");

function newestSourceMs(): number {
  return Math.max(...readdirSync(client).map((name) => statSync(join(client, name)).mtimeMs));
}

function builtMs(): number {
  try {
    return statSync(built).mtimeMs;
  } catch {
    return -Infinity;
  }
}

if (!process.argv.includes("--if-stale") || builtMs() < newestSourceMs()) {
  try {
    execFileSync(join(root, "node_modules", ".bin", "koishi-console"), ["build", "console"], { cwd: root, stdio: "pipe" });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    console.error(
      `${localeLanguage(process.env) === "en-US" ? "console page build failed" : "控制台页面构建失败"}:\n${stdout?.toString() ?? ""}${stderr?.toString() ?? ""}`,
    );
    process.exit(1);
  }
  // Part of what npm start prints, so in its language (server.json is not read yet here).
  console.log(localeLanguage(process.env) === "en-US" ? `console page built: ${built}` : `控制台页面已构建：${built}`);
}
