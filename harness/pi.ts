/**
 * Starts a REAL Pi runtime in-process through Pi's SDK, with pi-ai's faux provider scripting the
 * model, and loads this repository's extension from its package root, as Pi's loader does for an installed package. Tests drive it
 * like a user would: prompts, slash commands, abort, fork, reload, resume.
 *
 * ANON_NOTIFY_PI=next runs the same suite against Pi 1.6.0 (npm aliases `pi-coding-agent-next`,
 * `pi-ai-next`); anything else uses the pinned 0.87.1.
 */
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Type } from "typebox";
import type * as PiSdk from "@earendil-works/pi-coding-agent";
import type * as PiAi from "@earendil-works/pi-ai";
import type { AgentSession, AgentSessionRuntime, ExtensionAPI, ExtensionUIContext, InlineExtension, ToolDefinition } from "@earendil-works/pi-coding-agent";
import { PI_AI_PACKAGE, PI_FLAVOUR, PI_PACKAGE } from "./pi-flavour.ts";
import { closeAll } from "./cleanup.ts";
import type { AssistantMessage, FauxProviderHandle, SimpleStreamOptions, TranscriptContext } from "@earendil-works/pi-ai";

export { PI_FLAVOUR };
// The 1.6.0 types differ in places the tests do not touch; the pinned types describe both here.
export const sdk = (await import(PI_PACKAGE)) as typeof PiSdk;
export const ai = (await import(PI_AI_PACKAGE)) as typeof PiAi;

export const EXTENSION_ROOT = resolve(import.meta.dirname, "..");

export type ModelStep =
  | AssistantMessage
  | ((context: TranscriptContext, options: SimpleStreamOptions | undefined) => AssistantMessage | Promise<AssistantMessage>);

/** One call the faux model received: exactly what Pi sent it (system prompt and tools ride in system messages). */
export interface ModelCall {
  messages: TranscriptContext["messages"];
}

export interface UiCall {
  method: "notify" | "setStatus";
  args: unknown[];
}

export interface StartPiOptions {
  /** Load this repository's extension (false: Pi without it, for comparisons and benchmarks). */
  extension?: boolean;
  /** Reuse a temp root, e.g. to resume a session in a second runtime. */
  root?: string;
  /** Open this session file instead of creating a new one. */
  sessionFile?: string;
  /** false: an in-memory session (`--no-session`). */
  persist?: boolean;
  /** Pi's run mode as the extension sees it; "rpc" binds a UI that records notify/setStatus. */
  mode?: "rpc" | "json" | "print";
  /** Replaces parts of the recording UI in "rpc" mode, e.g. a `confirm` the test answers. */
  ui?: Partial<ExtensionUIContext>;
  flags?: Record<string, boolean | string>;
  tools?: ToolDefinition[];
  extensions?: InlineExtension[];
  settings?: Parameters<typeof PiSdk.SettingsManager.inMemory>[0];
  contextWindow?: number;
  maxTokens?: number;
  /** The faux model's stream: tokens per text delta (4 characters each; default 3–5). */
  tokenSize?: { min: number; max: number };
}

export interface PiHarness {
  readonly runtime: AgentSessionRuntime;
  readonly session: AgentSession;
  readonly faux: FauxProviderHandle;
  readonly root: string;
  readonly cwd: string;
  readonly agentDir: string;
  readonly sessionDir: string;
  readonly modelCalls: ModelCall[];
  readonly ui: UiCall[];
  readonly extensionErrors: string[];
  /** Queues model replies; each records what the model was sent. */
  script(steps: ModelStep[]): void;
  prompt(text: string): Promise<void>;
  sessionFile(): string | undefined;
  statusText(key: string): string | undefined;
  notices(): string[];
  /** Disposes the runtime (session_shutdown quit); `keepRoot` leaves files for a later runtime. */
  dispose(options?: { keepRoot?: boolean }): Promise<void>;
}

/** A temp root with the layout Pi expects; the caller owns its removal (dispose does it). */
export function makeRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-pi-"));
  for (const dir of ["agent", "work", "sessions"]) mkdirSync(join(root, dir));
  return root;
}

export async function startPi(options: StartPiOptions = {}): Promise<PiHarness> {
  process.env.PI_OFFLINE = "1";
  const root = options.root ?? makeRoot();
  const agentDir = join(root, "agent");
  // What the CLI would be given: extensions find Pi's agent folder (their data, config) through it.
  process.env.PI_CODING_AGENT_DIR = agentDir;
  const cwd = join(root, "work");
  const sessionDir = join(root, "sessions");
  const modelCalls: ModelCall[] = [];
  const ui: UiCall[] = [];
  const extensionErrors: string[] = [];

  const faux = ai.fauxProvider({
    provider: "faux",
    models: [{ id: "faux-1", contextWindow: options.contextWindow ?? 200_000, maxTokens: options.maxTokens ?? 16_000 }],
    ...(options.tokenSize ? { tokenSize: options.tokenSize } : {}),
  });
  const modelRuntime = await sdk.ModelRuntime.create({
    authPath: join(agentDir, "auth.json"),
    modelsPath: join(agentDir, "models.json"),
  });
  modelRuntime.registerNativeProvider(faux.provider);
  const settingsManager = sdk.SettingsManager.inMemory({
    retry: { enabled: true, maxRetries: 2, baseDelayMs: 1 },
    ...options.settings,
  });
  const flagValues = new Map(Object.entries(options.flags ?? {}));

  const createRuntime: PiSdk.CreateAgentSessionRuntimeFactory = async (factoryOptions) => {
    const services = await sdk.createAgentSessionServices({
      cwd: factoryOptions.cwd,
      agentDir: factoryOptions.agentDir,
      modelRuntime,
      settingsManager,
      extensionFlagValues: flagValues,
      resourceLoaderOptions: {
        additionalExtensionPaths: options.extension === false ? [] : [EXTENSION_ROOT],
        extensionFactories: options.extensions ?? [],
        noSkills: true,
        noPromptTemplates: true,
        noThemes: true,
        noContextFiles: true,
      },
    });
    const created = await sdk.createAgentSessionFromServices({
      services,
      sessionManager: factoryOptions.sessionManager,
      sessionStartEvent: factoryOptions.sessionStartEvent,
      model: faux.getModel(),
      thinkingLevel: "off",
      customTools: options.tools ?? [],
    });
    for (const error of created.extensionsResult.errors) extensionErrors.push(`load ${error.path}: ${error.error}`);
    return { ...created, services, diagnostics: services.diagnostics };
  };

  const sessionManager =
    options.persist === false
      ? sdk.SessionManager.inMemory(cwd)
      : options.sessionFile
        ? sdk.SessionManager.open(options.sessionFile, sessionDir)
        : sdk.SessionManager.create(cwd, sessionDir);
  const runtime = await sdk.createAgentSessionRuntime(createRuntime, { cwd, agentDir, sessionManager });
  const mode = options.mode ?? "rpc";
  const uiContext = mode === "rpc" ? { ...recordingUi(ui), ...options.ui } : undefined;

  const bind = async (session: AgentSession): Promise<void> => {
    await session.bindExtensions({
      mode,
      uiContext,
      commandContextActions: {
        waitForIdle: () => session.waitForIdle(),
        newSession: (o) => runtime.newSession(o),
        fork: async (entryId, o) => ({ cancelled: (await runtime.fork(entryId, o)).cancelled }),
        navigateTree: async (targetId, o) => ({ cancelled: (await session.navigateTree(targetId, o)).cancelled }),
        switchSession: (path, o) => runtime.switchSession(path, o),
        reload: () => runtime.session.reload(),
      },
      onError: (error) => extensionErrors.push(`${error.event}: ${error.error}`),
    });
  };
  runtime.setRebindSession(bind);
  try {
    await bind(runtime.session);
  } catch (error) {
    // A start that fails leaves nothing running (the extension's timers would keep the test file alive).
    await runtime.dispose().catch(() => {});
    if (!options.root) rmSync(root, { recursive: true, force: true });
    throw error;
  }

  return {
    runtime,
    get session() {
      return runtime.session;
    },
    faux,
    root,
    cwd,
    agentDir,
    sessionDir,
    modelCalls,
    ui,
    extensionErrors,
    script(steps) {
      faux.appendResponses(
        steps.map((step) => async (context: TranscriptContext, streamOptions: SimpleStreamOptions | undefined) => {
          modelCalls.push({ messages: structuredClone(context.messages) });
          return typeof step === "function" ? step(context, streamOptions) : step;
        }),
      );
    },
    prompt: (text) => runtime.session.prompt(text),
    sessionFile: () => runtime.session.sessionManager.getSessionFile(),
    statusText(key) {
      const calls = ui.filter((call) => call.method === "setStatus" && call.args[0] === key);
      return calls.at(-1)?.args[1] as string | undefined;
    },
    notices: () => ui.filter((call) => call.method === "notify").map((call) => String(call.args[0])),
    dispose: (disposeOptions) =>
      closeAll(
        () => runtime.dispose(),
        () => disposeOptions?.keepRoot || rmSync(root, { recursive: true, force: true }),
      ),
  };
}

/**
 * What an RPC host supplies as the UI binding, reduced to recording the two calls the extension
 * makes (notify, setStatus); dialogs answer "no UI".
 */
function recordingUi(calls: UiCall[]): ExtensionUIContext {
  const none = async () => undefined;
  const ignore = () => {};
  return {
    notify: (...args: unknown[]) => void calls.push({ method: "notify", args }),
    setStatus: (...args: unknown[]) => void calls.push({ method: "setStatus", args }),
    select: none,
    confirm: async () => false,
    input: none,
    onTerminalInput: () => ignore,
    setWorkingMessage: ignore,
    setWorkingVisible: ignore,
    setWorkingIndicator: ignore,
    setHiddenThinkingLabel: ignore,
    setWidget: ignore,
    setFooter: ignore,
    setHeader: ignore,
    setTitle: ignore,
    custom: none as ExtensionUIContext["custom"],
    pasteToEditor: ignore,
    setEditorText: ignore,
    getEditorText: () => "",
    editor: none,
    addAutocompleteProvider: ignore,
    setEditorComponent: ignore,
    getEditorComponent: () => undefined,
    theme: undefined as unknown as ExtensionUIContext["theme"],
    getAllThemes: () => [],
    getTheme: () => undefined,
    setTheme: () => ({ success: false, error: "UI not available" }),
    getToolsExpanded: () => false,
    setToolsExpanded: ignore,
  };
}

/** A tool that answers at once and lets the run go on. */
export function echoTool(name = "echo"): ToolDefinition {
  return {
    name,
    label: name,
    description: "Echoes.",
    parameters: Type.Object({}),
    async execute() {
      return { content: [{ type: "text", text: "ok" }], details: undefined };
    },
  };
}

/** A tool that always fails with `message` (its error text, the tool's own words). */
export function failingTool(name = "explode", message = "disk full"): ToolDefinition {
  return {
    name,
    label: name,
    description: "Always fails.",
    parameters: Type.Object({}),
    async execute() {
      throw new Error(message);
    },
  };
}

/** A tool whose result ends the run when every call in its batch says so. */
export function terminatingTool(name = "finish"): ToolDefinition {
  return {
    name,
    label: name,
    description: "Ends the run with a final result.",
    parameters: Type.Object({}),
    async execute() {
      return { content: [{ type: "text", text: "finished" }], details: undefined, terminate: true };
    },
  };
}

/** A tool that blocks until the run is aborted, then fails like an interrupted command. */
export function blockingTool(started: () => void, name = "wait_for_abort"): ToolDefinition {
  return {
    name,
    label: name,
    description: "Waits until aborted.",
    parameters: Type.Object({}),
    async execute(_id, _params, signal) {
      started();
      await new Promise<void>((resolveAbort) => {
        if (signal?.aborted) return resolveAbort();
        signal?.addEventListener("abort", () => resolveAbort(), { once: true });
      });
      throw new Error("aborted by user");
    },
  };
}

/** A model reply that waits for Pi's abort, as a streaming provider would. */
export function waitForAbortStep(started: () => void): ModelStep {
  return async (_context, streamOptions) => {
    started();
    await new Promise<void>((resolveAbort) => {
      const signal = streamOptions?.signal;
      if (!signal || signal.aborted) return resolveAbort();
      signal.addEventListener("abort", () => resolveAbort(), { once: true });
    });
    return ai.fauxAssistantMessage("", { stopReason: "aborted", errorMessage: "Request was aborted" });
  };
}

/** Resolves once `signal()` is called; for "wait until the model/tool is running". */
export function latch(): { promise: Promise<void>; signal: () => void } {
  let signal!: () => void;
  const promise = new Promise<void>((resolveLatch) => (signal = resolveLatch));
  return { promise, signal };
}

/** The text the model read last, as one string (a user message's parts, non-text parts as `<type>`). */
export function lastUserText(pi: PiHarness): string {
  const last = pi.modelCalls.at(-1)!.messages.at(-1)!;
  if (last.role !== "user") throw new Error(`the model read a ${last.role} message last, not the user's`);
  return (last.content as { type: string; text?: string }[]).map((c) => c.text ?? `<${c.type}>`).join("");
}

/** The results of `tool`'s calls the model read, in order. */
export function toolResults(pi: PiHarness, tool: string): { text: string; isError: boolean }[] {
  return pi.session.sessionManager
    .getBranch()
    .filter((e) => e.type === "message" && e.message.role === "toolResult" && e.message.toolName === tool)
    .map((e) => {
      const message = (e as unknown as { message: { content: { type: string; text?: string }[]; isError: boolean } }).message;
      return { text: message.content.map((c) => c.text ?? "").join(""), isError: message.isError };
    });
}

/**
 * A terminal whose confirm dialogs stay open until the test answers them (or the extension closes
 * them through the signal); every dialog opened is recorded.
 */
export function answerableTerminal() {
  const dialogs: { title: string; message: string; answer(yes: boolean): void; dismissed: Promise<void> }[] = [];
  const ui: Partial<ExtensionUIContext> = {
    confirm: (title, message, opts) =>
      new Promise<boolean>((resolveDialog) => {
        let dismiss!: () => void;
        const dismissed = new Promise<void>((r) => (dismiss = r));
        dialogs.push({ title, message, answer: resolveDialog, dismissed });
        opts?.signal?.addEventListener(
          "abort",
          () => {
            dismiss();
            resolveDialog(false);
          },
          { once: true },
        );
      }),
  };
  return { ui, dialogs };
}

export type { ExtensionAPI };
