/** `/anon-notify-setup <link>`: pairs this Pi with a server in one step and writes the endpoint,
 * recipient and token (0600) to the user's config folder. */
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ExtensionAPI, ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { replaceDurably } from "../../common/durable-file.ts";
import { errorText, isMissingFile } from "../../common/errors.ts";
import { normalisePairingCode, PAIRING_PATH, PairAnswer } from "../../protocol/pairing.ts";
import { HealthAnswer } from "../../protocol/status.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { agentDirFrom, dataDirFor, loadConfig } from "../config/config.ts";
import { isPlainObject } from "../config/layer-rules.ts";
import { createWebhookClient } from "../server-client/http-client.ts";
import { asServerError } from "../server-client/retry.ts";
import type { Messages } from "../texts/messages.ts";
import { routeWarning } from "../activation/toggle.ts";
import { type ReportLevel, show } from "./report.ts";

const PAIR_TIMEOUT_MS = 10_000;
/** Variables that override what pairing writes: said, so the person knows why pairing seems not to apply. */
const OVERRIDES = ["ANON_NOTIFY_ENDPOINT", "ANON_NOTIFY_TOKEN", "ANON_NOTIFY_RECIPIENT_QQ", "ANON_NOTIFY_ANON_QQ"] as const;

/** A printed pairing link (`<base>/pair#<code>`, maybe in quotes or angle brackets) as the events endpoint the config names (the link's API base with
 * `/events`) and the code, or why it is not one. Pure. */
export function parsePairingLink(raw: string): { endpoint: string; code: string } | { problem: "usage" | "not_a_link" } {
  const text = raw.trim().replace(/^["'<]|["'>]$/g, "");
  if (text === "") return { problem: "usage" };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { problem: "not_a_link" };
  }
  const code = normalisePairingCode(decodeURIComponent(url.hash.slice(1)));
  const base = url.pathname.replace(/\/+$/, "");
  if (!["http:", "https:"].includes(url.protocol) || !base.endsWith(`${API_BASE_PATH}${PAIRING_PATH}`) || code === "") return { problem: "not_a_link" };
  url.hash = "";
  url.search = "";
  url.pathname = `${base.slice(0, -PAIRING_PATH.length)}/events`;
  return { endpoint: url.toString(), code };
}

/** Sets `endpoint` and `recipient` in the user's config (its other keys kept, an inline `token`
 * removed) and writes the token file (0600), each through a temporary file and a rename. A config
 * that is not a JSON object is never overwritten: this throws before anything is written. */
async function writePairing(files: { config: string; token: string }, endpoint: string, answer: PairAnswer, m: Messages): Promise<void> {
  let current: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(files.config, "utf8"));
    if (!isPlainObject(parsed)) throw new Error(m.config.notObject(files.config));
    current = parsed;
  } catch (error) {
    if (!isMissingFile(error)) throw new Error(m.setup.configKept(files.config, errorText(error)));
  }
  const { token: _inline, ...kept } = current;
  const next = { ...kept, endpoint, recipient: { qq: answer.recipient.qq, anonQq: answer.recipient.anon_qq } };
  for (const path of [files.config, files.token]) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  await replaceDurably(files.token, `${answer.token}\n`);
  await replaceDurably(files.config, `${JSON.stringify(next, null, 2)}\n`);
}

/** The pairing itself: the code for the answer, the files written, the server asked with the new token. */
async function runSetup(raw: string, m: Messages): Promise<{ text: string; level: ReportLevel }> {
  const link = parsePairingLink(raw);
  if ("problem" in link) return { text: link.problem === "usage" ? m.setup.usage : m.setup.notALink(raw.trim()), level: "error" };
  const pairing = createWebhookClient({ endpoint: link.endpoint, token: undefined, timeoutMs: PAIR_TIMEOUT_MS });
  let answer: PairAnswer;
  try {
    answer = await pairing.request("POST", PAIRING_PATH, { body: { code: link.code }, schema: PairAnswer });
  } catch (error) {
    const why = asServerError(error).code === "pairing_code_invalid" ? m.setup.codeRefused : m.delivery.why(error);
    return { text: m.setup.failed(link.endpoint, why), level: "error" };
  } finally {
    await pairing.close();
  }
  const env = process.env;
  const dataDir = dataDirFor(agentDirFrom(env));
  const loaded = loadConfig({ cwd: process.cwd(), env: { ...env, ANON_NOTIFY_TOKEN: "" } });
  const files = { config: join(dataDir, "config.json"), token: loaded.ok ? loaded.config.tokenFile : join(dataDir, "token") };
  try {
    await writePairing(files, link.endpoint, answer, m);
  } catch (error) {
    return { text: errorText(error), level: "error" };
  }
  const client = createWebhookClient({ endpoint: link.endpoint, token: answer.token, timeoutMs: PAIR_TIMEOUT_MS });
  const health = await client.request("GET", "health", { schema: HealthAnswer }).catch(() => null);
  await client.close();
  const overridden = OVERRIDES.filter((name) => env[name]);
  const lines = [
    m.setup.paired(link.endpoint, files.config, files.token),
    health ? (routeWarning(m, health) ?? m.setup.reachesPerson) : m.setup.healthUnknown,
    ...(answer.chat ? [] : [m.setup.placeholders(answer.recipient.qq, answer.recipient.anon_qq)]),
    ...(overridden.length > 0 ? [m.setup.overridden(overridden)] : []),
    m.setup.next,
  ];
  return { text: lines.join("\n"), level: overridden.length > 0 ? "warning" : "info" };
}

/** `refresh` reads the session's config and token again, so the footer and `/anon-notify` follow at once. */
export function registerSetupCommand(pi: ExtensionAPI, deps: { text(): Messages; refresh(): Promise<void> }): void {
  pi.registerCommand("anon-notify-setup", {
    description: deps.text().setup.description,
    handler: async (args: string, ctx: ExtensionCommandContext) => {
      const outcome = await runSetup(args, deps.text());
      if (outcome.level !== "error") await deps.refresh();
      show(ctx, outcome.text, outcome.level);
    },
  });
}
