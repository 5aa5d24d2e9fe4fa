/** The one place Pi's events become run facts, so the chat notices and the desktop sink cannot disagree
 * about how a run ended. It listens only while someone observes; a run is agent_start to agent_settled. */
import type { AgentSettledEvent, ExtensionAPI, ExtensionContext, ToolExecutionEndEvent, ToolExecutionStartEvent } from "@earendil-works/pi-coding-agent";
import {
  classifyRun,
  startRun,
  withAbort,
  withAssistant,
  withAssistantEntry,
  withBeforeSettle,
  withCompaction,
  needsSettleTell,
  withLowLevelStart,
  withTask,
  withToolEnd,
  withTurn,
  type RunFacts,
  type RunOutcome,
} from "../lifecycle.ts";
import { attachable, type Attachable } from "./pi-handlers.ts";

/** `lastMessage`: the newest assistant message object, to find its persisted entry at the settle; `answer`: the newest with text, and when. */
export type RecordedRun = { facts: RunFacts; lastMessage?: unknown; answer: { text: string; at: number | undefined } | undefined };

/** What an observer is told; each callback runs inside Pi's handler, so it records and enqueues only. */
export interface RunObserver {
  /** The first low-level start of a run. */
  start?(run: RecordedRun, ctx: ExtensionContext): void;
  /** A user-visible request (user or custom message) was recorded; the first one named the task. */
  request?(run: RecordedRun): void;
  /** A turn (one model call and its tools) starts; `run.facts.turns` counts it. */
  turn?(run: RecordedRun, ctx: ExtensionContext): void;
  toolStart?(run: RecordedRun, event: ToolExecutionStartEvent): void;
  toolEnd?(run: RecordedRun, event: ToolExecutionEndEvent, ctx: ExtensionContext): void;
  /** Every `agent_settled`; `settled` is undefined when no run was recorded (nothing started). */
  settled?(settled: { run: RecordedRun; outcome: RunOutcome } | undefined, ctx: ExtensionContext): void;
}

export type Observation = { close(): void };

/** An assistant or user message's text: its text blocks, one per line, as Pi prints them; trimmed. */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content.trim();
  if (!Array.isArray(content)) return "";
  return (content as { type?: unknown; text?: unknown }[])
    .flatMap((block) => (block.type === "text" && typeof block.text === "string" ? [block.text] : []))
    .join("\n")
    .trim();
}

export type BranchEntry = { id: string; parentId: string | null; type: string; message?: unknown };

function newestMessage(leaf: BranchEntry | undefined, entry: (id: string) => BranchEntry | undefined, wanted: (message: unknown) => boolean) {
  for (let current = leaf; current; current = current.parentId === null ? undefined : entry(current.parentId)) {
    if (current.type === "message" && wanted(current.message)) return current;
  }
  return undefined;
}

/** The entry that persisted `message` (the object Pi handed to message_end): at a settle it is at or near the leaf, so this costs a step or two,
 * where a turn_end handler would make Pi build the whole context preview at every turn. */
export function persistedEntryId(message: unknown, leaf: BranchEntry | undefined, entry: (id: string) => BranchEntry | undefined): string | undefined {
  return newestMessage(leaf, entry, (m) => m === message)?.id;
}

/** The task of the run in progress, read back from the branch: the newest user message's text (its prompt, or a steer since, as the recorder saw it). */
export function taskInProgress(leaf: BranchEntry | undefined, entry: (id: string) => BranchEntry | undefined): string {
  const found = newestMessage(leaf, entry, (m) => (m as { role?: unknown } | undefined)?.role === "user");
  return found ? messageText((found.message as { content?: unknown }).content) : "";
}

/** A run the recorder joins in progress: started now, one low-level run, its task from the session. */
function joinedRun(ctx: ExtensionContext): RecordedRun | undefined {
  try {
    if (ctx.isIdle()) return undefined;
    const sessionManager = ctx.sessionManager;
    const task = taskInProgress(sessionManager.getLeafEntry(), (id) => sessionManager.getEntry(id));
    return { facts: withTask(withLowLevelStart({ ...startRun(Date.now()), startKnown: false }), task), answer: undefined };
  } catch {
    // A stale ctx (the runtime was replaced): nothing to join.
    return undefined;
  }
}

const recorders = new WeakMap<ExtensionAPI, RunRecorder>();

/** One recorder per extension runtime, shared by every channel. */
export function runRecorderFor(pi: ExtensionAPI): RunRecorder {
  let recorder = recorders.get(pi);
  if (!recorder) recorders.set(pi, (recorder = new RunRecorder(pi)));
  return recorder;
}

type EndedMessage = { role: string; content?: unknown; stopReason?: string; errorMessage?: string; timestamp?: number };

export class RunRecorder {
  #run: RecordedRun | undefined;
  /** Each observer, and whether it needs the exact outcome (entry ids, Pi 0.87.1's before-settle tell, which costs a context preview per settle). */
  readonly #observers = new Map<RunObserver, boolean>();
  readonly #basic: Attachable;
  readonly #settleTell: Attachable;

  constructor(pi: ExtensionAPI) {
    this.#basic = attachable(() => [
      pi.on("agent_start", (_event, ctx) => this.#agentStart(ctx)),
      pi.on("message_end", (event) => this.#messageEnd(event.message as EndedMessage)),
      pi.on("turn_start", (_event, ctx) => {
        const current = this.#run;
        if (!current) return;
        current.facts = withTurn(current.facts);
        this.#each((o) => o.turn?.(current, ctx));
      }),
      pi.on("tool_execution_start", (event) => {
        const current = this.#run;
        if (current) this.#each((o) => o.toolStart?.(current, event));
      }),
      pi.on("tool_execution_end", (event, ctx) => this.#toolEnd(event, ctx)),
      pi.on("agent_end", (_event, ctx) => {
        if (ctx.signal?.aborted && this.#run) this.#run.facts = withAbort(this.#run.facts);
      }),
      pi.on("session_before_compact", () => {
        if (!this.#run) return;
        this.#run.facts = withCompaction(this.#run.facts);
        this.#syncSettleTell();
      }),
      // agent_end is not final (retry, compaction or queued work may follow); agent_settled is, once per run.
      pi.on("agent_settled", (event, ctx) => this.#agentSettled(event, ctx)),
    ]);
    this.#settleTell = attachable(() => [
      // Pi 0.87.1 skips agent_before_settle exactly when the run was aborted.
      pi.on("agent_before_settle", () => {
        if (this.#run) this.#run.facts = withBeforeSettle(this.#run.facts);
      }),
    ]);
  }

  current(): RecordedRun | undefined {
    return this.#run;
  }

  /** `joining`: the session now; when nobody listened yet and a run is in progress there, that run is recorded from now on, its task taken from the branch. */
  observe(observer: RunObserver, options: { exact: boolean }, joining?: ExtensionContext): Observation {
    if (this.#observers.size === 0 && joining) this.#run = joinedRun(joining);
    this.#observers.set(observer, options.exact);
    this.#sync();
    return {
      close: () => {
        if (this.#observers.delete(observer)) this.#sync();
      },
    };
  }

  #each(call: (observer: RunObserver) => void): void {
    for (const observer of [...this.#observers.keys()]) call(observer);
  }

  #agentStart(ctx: ExtensionContext): void {
    const first = !this.#run;
    const current = (this.#run ??= { facts: startRun(Date.now()), answer: undefined });
    current.facts = withLowLevelStart(current.facts);
    this.#syncSettleTell();
    // Esc and ctx.abort() abort this low-level run's signal; a retry gets a new one.
    ctx.signal?.addEventListener("abort", () => (current.facts = withAbort(current.facts)), { once: true });
    if (first) this.#each((o) => o.start?.(current, ctx));
  }

  #messageEnd(message: EndedMessage): void {
    const run = this.#run;
    if (!run) return;
    if (message.role === "user" || message.role === "custom") {
      run.facts = withTask(run.facts, messageText(message.content));
      this.#each((o) => o.request?.(run));
    } else if (message.role === "assistant") {
      const text = messageText(message.content);
      const toolCalls = Array.isArray(message.content) ? (message.content as { type?: unknown }[]).filter((b) => b.type === "toolCall").length : 0;
      const ended = { stopReason: message.stopReason ?? "stop", errorMessage: message.errorMessage ?? null };
      run.facts = withAssistant(run.facts, { ...ended, text, entryId: null, toolCalls });
      run.lastMessage = message;
      this.#syncSettleTell();
      if (text) run.answer = { text, at: message.timestamp };
    }
  }

  #toolEnd(event: ToolExecutionEndEvent, ctx: ExtensionContext): void {
    const current = this.#run;
    if (!current) return;
    // `terminate` is not persisted on the tool result message: this is the only place to see it.
    const result = event.result as { terminate?: unknown } | undefined;
    current.facts = withToolEnd(current.facts, { terminate: result?.terminate === true, isError: event.isError });
    this.#each((o) => o.toolEnd?.(current, event, ctx));
  }

  #agentSettled(event: AgentSettledEvent, ctx: ExtensionContext): void {
    const finished = this.#run;
    this.#run = undefined;
    if (finished?.lastMessage && this.#exactWanted()) {
      const sessionManager = ctx.sessionManager;
      const entryId = persistedEntryId(finished.lastMessage, sessionManager.getLeafEntry(), (id) => sessionManager.getEntry(id));
      // The final notice's id comes from the persisted assistant entry.
      if (entryId) finished.facts = withAssistantEntry(finished.facts, entryId);
    }
    const aborted = (event as AgentSettledEvent & { aborted?: unknown }).aborted;
    const settled = finished && { run: finished, outcome: classifyRun(finished.facts, typeof aborted === "boolean" ? aborted : undefined) };
    this.#syncSettleTell();
    this.#each((o) => o.settled?.(settled, ctx));
  }

  #exactWanted(): boolean {
    return [...this.#observers.values()].includes(true);
  }

  /** Attached from the moment a run can be aborted between low-level runs until it settles. */
  #syncSettleTell(): void {
    this.#settleTell.set(this.#run !== undefined && this.#exactWanted() && needsSettleTell(this.#run.facts));
  }

  #sync(): void {
    this.#basic.set(this.#observers.size > 0);
    this.#syncSettleTell();
    // Nobody listens: a run half-seen would be judged wrongly by a later observer.
    if (this.#observers.size === 0) this.#run = undefined;
  }
}
