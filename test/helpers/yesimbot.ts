/**
 * The real YesImBot 3.0.3 for tests, installed offline from the fixture tarball (built unchanged
 * from its public source; not on our registry), plus an OpenAI-compatible stub model on loopback
 * that records every request and answers in YesImBot v3's JSON reply format
 * (`{ thoughts, actions: [{ function, params }], request_heartbeat }`).
 *
 * The tarball is unpacked once into `.tmp/` inside the repository, so that its `require("koishi")`
 * resolves to this repository's node_modules: one koishi/cordis for every plugin of the app.
 */
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import type { Context, Plugin } from "koishi";
import type { Use } from "../../harness/koishi.ts";
import { ChangeWaiters } from "../../harness/wait.ts";

const REPO_ROOT = resolve(import.meta.dirname, "../..");
const TARBALL = "koishi-plugin-yesimbot-3.0.3.tgz";
/** CI keeps shared fixtures next to the clone; a worktree elsewhere points at them with the variable. */
export const FIXTURE_DIR = resolve(REPO_ROOT, process.env.ANON_NOTIFY_YESIMBOT_FIXTURE ?? "../shared/fixtures/yesimbot-3.0.3");
export const FIXTURE_PRESENT = existsSync(join(FIXTURE_DIR, TARBALL));

const require = createRequire(import.meta.url);

/** The unpacked package folder; unpacks it on first use (atomically, so parallel test files agree). */
function unpacked(): string {
  const tarball = readFileSync(join(FIXTURE_DIR, TARBALL));
  const digest = createHash("sha256").update(tarball).digest("hex");
  const expected = readFileSync(join(FIXTURE_DIR, "SHA256"), "utf8").trim().split(/\s+/)[0];
  if (digest !== expected) throw new Error(`${TARBALL}: sha256 ${digest} does not match the fixture's SHA256 ${expected}`);
  const cacheRoot = join(REPO_ROOT, ".tmp");
  const target = join(cacheRoot, `yesimbot-3.0.3-${digest.slice(0, 16)}`);
  if (!existsSync(join(target, "package", "package.json"))) {
    mkdirSync(cacheRoot, { recursive: true });
    const staging = mkdtempSync(join(cacheRoot, "yesimbot-unpack-"));
    execFileSync("tar", ["-xzf", join(FIXTURE_DIR, TARBALL), "-C", staging]);
    try {
      renameSync(staging, target);
    } catch (error) {
      // Another test process unpacked it first.
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(join(target, "package", "package.json"))) throw error;
    }
  }
  return join(target, "package");
}

/** YesImBot's plugin (a Koishi Service class) from the unpacked fixture. */
export function yesImBotPlugin(): Plugin<Context> {
  return require(unpacked()).default as Plugin<Context>;
}

// CommonJS builds, so they share koishi's copy of cordis (see server/koishi.ts).
const httpPlugin = require("@koishijs/plugin-http").default as Plugin<Context>;
const consolePlugin = require("@koishijs/plugin-console").default as Plugin<Context>;
const notifierPlugin = require("@koishijs/plugin-notifier").default as Plugin<Context>;

/** The services YesImBot 3.0.3 requires besides `database` and `server`. */
export function useYesImBotServices(use: Use): void {
  use(httpPlugin);
  use(consolePlugin, { open: false });
  use(notifierPlugin);
}

export interface YesImBotOptions {
  modelUrl: string;
  /** Chats where user messages start turns (YesImBot's `allowedChannels`). */
  allowedChannels: { platform: string; type: "private" | "guild"; id: string }[];
}

/** A config a user would write, made deterministic: every allowed message gets a reply, no typing delay. */
export function yesImBotConfig({ modelUrl, allowedChannels }: YesImBotOptions): Record<string, unknown> {
  return {
    providers: [
      {
        name: "stub",
        type: "OpenAI Compatible",
        baseURL: `${modelUrl}/v1/`,
        apiKey: "x",
        models: [{ modelId: "stub-1", abilities: ["对话", "函数调用"] }],
      },
    ],
    modelGroups: [{ name: "g", models: [{ providerName: "stub", modelId: "stub-1" }], strategy: "failover" }],
    task: { chat: "g", embed: "g" },
    allowedChannels,
    // A burst of stimuli collapses within this window (1 s by default); short keeps the tests quick.
    debounceMs: 20,
    // Willingness above the threshold with amplifier 1 is a reply probability of 1.
    lifecycle: { probabilityThreshold: 0, probabilityAmplifier: 1 },
    l2_memory: { enabled: false },
    extra: { core_util: { typing: { baseDelay: 0, charPerSecond: 1000, minDelay: 0, maxDelay: 0 } } },
    // Never upload a test's errors to YesImBot's paste service.
    errorReporting: { enabled: false },
    logging: { level: 1 /* errors only */ },
  };
}

/** One request YesImBot made to the model. */
export interface ModelRequest {
  path: string;
  body: { model?: string; stream?: boolean; messages?: { role: string; content: unknown }[] } & Record<string, unknown>;
}

/** YesImBot v3's reply format. */
export interface AgentReply {
  thoughts?: { observe?: string; analyze_infer?: string; plan?: string };
  actions: { function: string; params: Record<string, unknown> }[];
  request_heartbeat: boolean;
}

export type Responder = (request: ModelRequest) => AgentReply | Promise<AgentReply>;
export type RequestMatch = (request: ModelRequest) => boolean;

/** All text YesImBot sent in one chat request (system and user prompts). */
export function promptText(request: ModelRequest): string {
  return (request.body.messages ?? []).map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
}

export function occurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) count++;
  return count;
}

export const IDLE_REPLY: AgentReply = { thoughts: { observe: "", analyze_infer: "", plan: "" }, actions: [], request_heartbeat: false };

/** The part of YesImBot's prompt with what is new this turn or heartbeat (its instructions mention the tag earlier). */
export function newEvents(request: ModelRequest): string {
  const text = promptText(request);
  return text.slice(text.lastIndexOf("<new_events>"), text.lastIndexOf("</new_events>"));
}

/**
 * An OpenAI-compatible chat endpoint on 127.0.0.1. Each chat request is answered by the first
 * waiting rule it matches (each rule answers once), else by the next scripted responder, else with
 * an idle reply; streamed or not as asked.
 */
export class StubModel {
  readonly requests: ModelRequest[] = [];
  readonly #rules: { match: RequestMatch; responder: Responder }[] = [];
  readonly #responders: Responder[] = [];
  readonly #waiters = new ChangeWaiters();
  #server: Server | undefined;
  url = "";

  async start(): Promise<this> {
    this.#server = createServer((req, res) => void this.#handle(req, res));
    await new Promise<void>((done) => this.#server!.listen(0, "127.0.0.1", done));
    const address = this.#server.address();
    if (!address || typeof address === "string") throw new Error("stub model: no port");
    this.url = `http://127.0.0.1:${address.port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((done) => (this.#server ? this.#server.close(() => done()) : done()));
  }

  /** Queues answers for the next chat requests, in order. */
  script(...responders: (Responder | AgentReply)[]): void {
    for (const responder of responders) this.#responders.push(typeof responder === "function" ? responder : () => responder);
  }

  /** Answers the first request that `match`es (once), whenever it comes. */
  when(match: RequestMatch, responder: Responder | AgentReply): void {
    this.#rules.push({ match, responder: typeof responder === "function" ? responder : () => responder });
  }

  get chatRequests(): ModelRequest[] {
    return this.requests.filter((r) => r.path.endsWith("/chat/completions"));
  }

  /** Resolves with the n-th chat request (1-based) once it has arrived. */
  chatRequest(n: number, what = `model request #${n}`): Promise<ModelRequest> {
    return this.until(() => this.chatRequests[n - 1], what);
  }

  /** Resolves with the first chat request that `match`es, once it has arrived. */
  request(match: RequestMatch, what: string): Promise<ModelRequest> {
    return this.until(() => this.chatRequests.find(match), what);
  }

  async until<T>(check: () => T | undefined, what: string, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = check();
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`never happened: ${what}`);
      await this.#waiters.next(left);
    }
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const request: ModelRequest = { path: req.url ?? "", body: raw ? JSON.parse(raw) : {} };
    this.requests.push(request);
    this.#waiters.changed();
    if (!request.path.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "stub: not found" } }));
      return;
    }
    const rule = this.#rules.findIndex((r) => r.match(request));
    const responder = rule === -1 ? this.#responders.shift() : this.#rules.splice(rule, 1)[0]!.responder;
    const reply = responder ? await responder(request) : IDLE_REPLY;
    const text = JSON.stringify(reply);
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    const base = { id: `chatcmpl-${this.requests.length}`, created: Math.floor(Date.now() / 1000), model: request.body.model ?? "stub-1" };
    if (request.body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
      send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null }] });
      send({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage });
      res.end("data: [DONE]\n\n");
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        ...base,
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
        usage,
      }),
    );
  }
}
