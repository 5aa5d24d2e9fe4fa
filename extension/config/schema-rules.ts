/** The configuration's shape: one strict zod schema and its defaults. */
import { isAbsolute } from "node:path";
import { z } from "zod";
import { BUILTIN_RULE_IDS, RuleId } from "../../protocol/approvals.ts";
import { SinkEventType } from "../../protocol/sink.ts";
import { LANGUAGES } from "../texts/messages.ts";
import type { SchemaCheck } from "../texts/config.ts";
import { DEFAULT_ENDPOINT, LIMITS } from "../../protocol/wire.ts";

const SECOND_MS = 1000;
const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/** Where a file-system path in the config may point: absolute, `~/…`, or under a placeholder folder. */
const PATH_PLACEHOLDERS = ["{dataDir}", "{socketDir}"] as const;

function looksAbsolute(path: string): boolean {
  const withoutPlaceholder = PATH_PLACEHOLDERS.reduce((p, token) => (p.startsWith(token) ? `/x${p.slice(token.length)}` : p), path);
  return withoutPlaceholder === "~" || withoutPlaceholder.startsWith("~/") || isAbsolute(withoutPlaceholder) || /^[A-Za-z]:[\\/]/.test(withoutPlaceholder);
}

/** A check of this schema's own: only its text's key, so a parse in either language words it (config.ts passes the error map). */
const check = (text: SchemaCheck) => ({ params: { text } });

const filePath = z.string().min(1).refine(looksAbsolute, check("absolutePath"));

/** Why a sink socket value is not a local socket path (a text key), or undefined when it is one. */
export function sinkSocketProblem(socket: string): SchemaCheck | undefined {
  if (/^[A-Za-z][A-Za-z0-9+.-]+:/.test(socket)) return "socketUrl";
  if (/^[^/\\~]+:\d+$/.test(socket)) return "socketHostPort";
  if (/^\\\\[.?]\\pipe\\/i.test(socket)) return undefined;
  return looksAbsolute(socket) ? undefined : "socketNotAbsolute";
}
const socketPath = z
  .string()
  .min(1)
  .superRefine((socket, ctx) => {
    const problem = sinkSocketProblem(socket);
    if (problem) ctx.addIssue({ code: "custom", params: { text: problem } });
  });

const regexSource = z
  .string()
  .min(1)
  .max(1000)
  .refine((source) => {
    try {
      new RegExp(source);
      return true;
    } catch {
      return false;
    }
  }, check("regex"));

/** A rule the user adds: a tool name (or `*`) and, for tools with a command line, a pattern on it. */
const ApprovalRule = z.strictObject({
  /** Sent with the request as one of its `rules`; the `opaque.` and `model.` names are the gate's own. */
  id: RuleId.refine(
    (id) => !/^(opaque|model|strict)\./.test(id) && id !== "protected-path" && !(BUILTIN_RULE_IDS as readonly string[]).includes(id),
    "must not be a built-in rule id or start with opaque./model./strict.",
  ),
  tool: z.string().trim().min(1).max(128),
  command: regexSource.optional(),
  label: z.string().trim().min(1).max(40).optional(),
  /** The owner may answer a request this rule matched with a standing grant for the session (default: never). */
  grantable: z.boolean().optional(),
});

/** An allowed command: its first words exactly as they will run, never a pattern (`*` matches only a literal `*`). */
const AllowedPrefix = z
  .array(
    z
      .string()
      .min(1, "must not be an empty word")
      .max(256)
      .regex(/^[^\0\n]*$/, "must be one word on one line"),
  )
  .min(1, 'must name at least the program, e.g. ["npm", "test"]')
  .max(32)
  .refine((words) => !(words[0] ?? "").includes("/") && !/[*?[\]{}$`]/.test(words.join("")), {
    message: 'must be exact words, e.g. ["npm", "test"]: the program by its name (no "/"), no patterns, globs or variables',
  });

const SOURCE_VARIABLES = ["project", "cwd", "sessionId", "model", "mode"] as const;
export type SourceVariables = Partial<Record<(typeof SOURCE_VARIABLES)[number], string | null>>;
const sourceTemplate = z
  .string()
  .min(1)
  .max(LIMITS.sourceChars)
  .refine(
    (template) => [...template.matchAll(/\{([^{}]*)\}/g)].every((m) => (SOURCE_VARIABLES as readonly string[]).includes(m[1] ?? "")),
    check("sourceVariables"),
  );

const ms = (min: number, max: number) => z.number().int().min(min).max(max);
// QQ numbers are checked at enabling (recipientProblem): a typo must refuse activation with its reason, not switch the whole extension off.
const qq = z.string().trim();

// One switch per event type the sink protocol defines, so a new type cannot be missed here.
const SINK_EVENTS = SinkEventType.options;

export const Config = z.strictObject({
  /** Global master switch; a session still has to be enabled with /anon-notify. */
  enabled: z.boolean(),
  // Worded by config.ts's error map (the only URL here): zod's url check takes no params.
  endpoint: z.url({ protocol: /^https?$/ }),
  token: z.string().trim().min(1).optional(),
  tokenFile: filePath,
  source: sourceTemplate,
  /** The language of the extension's texts in Pi; unset, the environment's locale decides. */
  language: z.enum(LANGUAGES).optional(),
  /** Lets `<project>/.pi/anon-notify.json` override settings; see loadConfig for the trust rule. */
  projectConfig: z.boolean(),
  mainAgentOnly: z.boolean(),
  recipient: z.strictObject({ qq, anonQq: qq }),
  notify: z.strictObject({
    started: z.boolean(),
    progress: z.boolean(),
    completed: z.boolean(),
    failed: z.boolean(),
    toolError: z.boolean(),
    /** Legacy: read so old files stay valid; interrupts are always silent. */
    cancelled: z.boolean().optional(),
  }),
  progress: z.strictObject({
    firstAfterMs: ms(SECOND_MS, DAY_MS),
    intervalMs: ms(SECOND_MS, DAY_MS),
    toolCountThreshold: z.number().int().min(1).max(100_000),
    errorCooldownMs: ms(0, DAY_MS),
  }),
  delivery: z.strictObject({
    timeoutMs: ms(100, 2 * MINUTE_MS),
    maxAttempts: z.number().int().min(1).max(10),
    backoffMs: ms(0, LIMITS.retryAfterMaxMs),
    minIntervalMs: ms(0, DAY_MS),
    outboxMaxAgeMs: ms(MINUTE_MS, 90 * DAY_MS),
  }),
  command: z.strictObject({
    enabled: z.boolean(),
    journal: filePath,
    idlePollIntervalMs: ms(100, HOUR_MS),
    deliveryWhenBusy: z.enum(["steer", "followUp"]),
    /** Compatibility only: the extension claims one command at a time. */
    maxBatchSize: z.number().int().min(1).max(100).optional(),
    longPollMs: ms(0, LIMITS.longPollMaxMs),
  }),
  presence: z.strictObject({
    heartbeatIntervalMs: ms(SECOND_MS, 5 * MINUTE_MS),
    /** Compatibility only: how long a session stays online without a heartbeat is the server's `ttl_ms`. */
    heartbeatTimeoutMs: ms(SECOND_MS, HOUR_MS).optional(),
  }),
  content: z.strictObject({
    maxTaskChars: z.number().int().min(1).max(LIMITS.taskChars),
    maxSummaryChars: z.number().int().min(1).max(LIMITS.summaryChars),
    includeProject: z.boolean(),
    includeFinalReply: z.boolean(),
    // Legacy: type-checked so a typo is still reported, then forced off by normaliseLegacy.
    includeModel: z.boolean().optional(),
    includeDuration: z.boolean().optional(),
    includeToolCounts: z.boolean().optional(),
  }),
  sink: z.strictObject({
    enabled: z.boolean(),
    socket: socketPath,
    tokenFile: filePath,
    events: z.strictObject(Object.fromEntries(SINK_EVENTS.map((e) => [e, z.boolean()])) as Record<SinkEventType, z.ZodBoolean>),
  }),
  progressTool: z.strictObject({ enabled: z.boolean() }),
  approval: z.strictObject({
    /** Opt-in: risky tool calls wait for a person, and the model may ask with ask_approval. */
    enabled: z.boolean(),
    /** `strict`: a command runs unasked only when every command in it is known safe or allowed; `rules`: unless a rule matches (catches mistakes, not an adversary). */
    mode: z.enum(["strict", "rules"]),
    /** Strict mode: commands that run unasked, by exact argv prefix (`["npm", "test"]`); their other words may name no path outside the project. */
    allow: z.array(AllowedPrefix).max(200),
    disabledRules: z.array(z.enum(BUILTIN_RULE_IDS)).max(BUILTIN_RULE_IDS.length),
    rules: z.array(ApprovalRule).max(100),
    /** Built-in rules the owner may answer with a standing grant for the session (none by default; never the fail-closed `opaque.*` ones). */
    grantableRules: z.array(z.enum(BUILTIN_RULE_IDS)).max(BUILTIN_RULE_IDS.length),
    /** How long a call waits for an answer; no answer is a rejection. */
    timeoutMs: ms(SECOND_MS, DAY_MS),
    /** Where nobody can answer (print/json mode, subagents, no UI and not switched on): reject, or let the rules not apply there. */
    noPerson: z.enum(["reject", "allow"]),
    /** One "needs you" notice when Pi waits on another extension's dialog in a switched-on session. */
    needsYou: z.boolean(),
  }),
});
export type Config = z.infer<typeof Config>;

// Where the desktop app creates its socket on each platform; Windows has only named pipes, so its token cannot sit "beside" it.
const SINK_PATHS: { socket: string; tokenFile: string } =
  process.platform === "darwin"
    ? { socket: "~/Library/Application Support/VPet/notify.sock", tokenFile: "{socketDir}/notify.token" }
    : process.platform === "win32"
      ? { socket: "\\\\.\\pipe\\vpet-notify", tokenFile: "~/AppData/Roaming/VPet/notify.token" }
      : { socket: "~/.local/state/vpet/notify.sock", tokenFile: "{socketDir}/notify.token" };

export const DEFAULT_CONFIG: Config = {
  enabled: true,
  endpoint: DEFAULT_ENDPOINT,
  tokenFile: "{dataDir}/token",
  source: "Pi Agent · {project}",
  projectConfig: false,
  mainAgentOnly: true,
  recipient: { qq: "", anonQq: "" },
  notify: { started: false, progress: false, completed: true, failed: true, toolError: false },
  progress: { firstAfterMs: 10 * MINUTE_MS, intervalMs: 10 * MINUTE_MS, toolCountThreshold: 50, errorCooldownMs: 5 * MINUTE_MS },
  delivery: { timeoutMs: 12 * SECOND_MS, maxAttempts: 3, backoffMs: SECOND_MS, minIntervalMs: 5 * MINUTE_MS, outboxMaxAgeMs: 7 * DAY_MS },
  command: { enabled: true, journal: "{dataDir}/commands.jsonl", idlePollIntervalMs: SECOND_MS, deliveryWhenBusy: "steer", longPollMs: LIMITS.longPollMaxMs },
  presence: { heartbeatIntervalMs: 10 * SECOND_MS },
  content: { maxTaskChars: LIMITS.taskChars, maxSummaryChars: LIMITS.summaryChars, includeProject: true, includeFinalReply: true },
  sink: { enabled: false, ...SINK_PATHS, events: Object.fromEntries(SINK_EVENTS.map((e) => [e, true])) as Record<SinkEventType, boolean> },
  progressTool: { enabled: false },
  approval: {
    enabled: false,
    mode: "strict",
    allow: [],
    disabledRules: [],
    rules: [],
    grantableRules: [],
    timeoutMs: 10 * MINUTE_MS,
    noPerson: "reject",
    needsYou: true,
  },
};

/** `--anon-notify-approvals` (docs/protocol.md "Forced approvals"): the gate on in strict mode over the user's config; any value, or no config, fails closed. */
export function withForcedApprovals(config: Config | undefined, flag: unknown): Config | undefined {
  if (flag === undefined || flag === false) return config;
  const base = config ?? DEFAULT_CONFIG;
  return { ...base, approval: { ...base.approval, enabled: true, mode: "strict", noPerson: "reject", disabledRules: [], allow: [] } };
}
