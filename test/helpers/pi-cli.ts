/**
 * Pi's own CLI as a user runs it: the package's `pi` bin (0.87.1, or 1.6.0 with ANON_NOTIFY_PI=next)
 * spawned on the pinned Node 22, in a temp agent folder (PI_CODING_AGENT_DIR, HOME) whose models.json
 * registers a stub OpenAI-compatible model served on loopback. The stub records every request and
 * streams scripted replies as chat-completion SSE, the way Pi's `openai-completions` API reads them.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { homedir, tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { PI_FLAVOUR, PI_PACKAGE } from "../../harness/pi-flavour.ts";
import { closeAll } from "../../harness/cleanup.ts";

export { PI_FLAVOUR };
export const REPO = resolve(import.meta.dirname, "../..");
/** The devDependency Node 22, whatever Node runs the test itself. */
export const PINNED_NODE = join(REPO, "node_modules/.bin/node");
const piPackageDir = join(REPO, "node_modules", PI_PACKAGE);
const piBin = (JSON.parse(readFileSync(join(piPackageDir, "package.json"), "utf8")) as { bin: { pi: string } }).bin.pi;
export const PI_CLI = join(piPackageDir, piBin);

export const STUB_PROVIDER = "stub";
export const STUB_MODEL_ID = "stub-1";
const STUB_API_KEY = "stub-key";

// ── The stub model ───────────────────────────────────────────────────────────

export interface StubToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** One scripted answer: text, tool calls, or an HTTP error the provider reports as such. */
export type StubReply = { text: string } | { toolCalls: StubToolCall[] } | { status: number; message: string };

/** One chat-completions request as Pi sent it. */
export interface StubRequest {
  model: string;
  messages: { role: string; content: unknown }[];
  tools?: { function: { name: string } }[];
  stream?: boolean;
}

export interface StubModel {
  readonly baseUrl: string;
  readonly requests: StubRequest[];
  /** Queues replies, used in order; a request with nothing queued gets a 400 naming the gap. */
  script(...replies: StubReply[]): void;
  close(): Promise<void>;
}

/** The text of a request's last user message (Pi sends plain strings or text parts). */
export function lastUserText(request: StubRequest): string {
  const user = request.messages.findLast((message) => message.role === "user");
  if (!user) return "";
  if (typeof user.content === "string") return user.content;
  return (user.content as { type: string; text?: string }[])
    .filter((part) => part.type === "text")
    .map((part) => part.text ?? "")
    .join("");
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function streamReply(response: ServerResponse, model: string, reply: { text: string } | { toolCalls: StubToolCall[] }): void {
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices, ...extra })}\n\n`;
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  response.write(chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]));
  let finish: "stop" | "tool_calls";
  if ("text" in reply) {
    // Two deltas, so Pi assembles the message from a real stream.
    const half = Math.ceil(reply.text.length / 2);
    for (const part of [reply.text.slice(0, half), reply.text.slice(half)]) {
      if (part) response.write(chunk([{ index: 0, delta: { content: part }, finish_reason: null }]));
    }
    finish = "stop";
  } else {
    reply.toolCalls.forEach((call, index) => {
      const delta = {
        tool_calls: [{ index, id: `call_${randomUUID()}`, type: "function", function: { name: call.name, arguments: JSON.stringify(call.arguments) } }],
      };
      response.write(chunk([{ index: 0, delta, finish_reason: null }]));
    });
    finish = "tool_calls";
  }
  response.write(chunk([{ index: 0, delta: {}, finish_reason: finish }]));
  response.write(chunk([], { usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } }));
  response.end("data: [DONE]\n\n");
}

/** `onRequest` hears each request as it arrives (a bench times the first model call with it). */
export async function startStubModel(onRequest?: (request: StubRequest) => void): Promise<StubModel> {
  const requests: StubRequest[] = [];
  const queue: StubReply[] = [];
  const server = createServer(async (request, response) => {
    const fail = (status: number, message: string) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message, type: "invalid_request_error" } }));
    };
    if (request.method !== "POST" || request.url !== "/v1/chat/completions") return fail(404, `stub model: no route ${request.method} ${request.url}`);
    if (request.headers.authorization !== `Bearer ${STUB_API_KEY}`) return fail(401, "stub model: wrong API key");
    const body = (await readJson(request)) as StubRequest;
    requests.push(body);
    onRequest?.(body);
    const reply = queue.shift();
    if (!reply) return fail(400, `stub model: no scripted reply for request ${requests.length}`);
    if ("status" in reply) return fail(reply.status, reply.message);
    streamReply(response, body.model, reply);
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    script: (...replies) => void queue.push(...replies),
    close: () =>
      new Promise<void>((closed) => {
        server.closeAllConnections();
        server.close(() => closed());
      }),
  };
}

// ── The agent folder and the process ─────────────────────────────────────────

export interface PiHome {
  /** Temp root: `agent/` (PI_CODING_AGENT_DIR), `home/` (HOME), `work/` (the cwd, no `.pi/`). */
  readonly root: string;
  readonly agentDir: string;
  readonly cwd: string;
  /** The environment every run gets (see isolatedEnv). */
  readonly env: Record<string, string>;
  dispose(): void;
}

/**
 * The test's environment without anything that would steer Pi, the extension or npm from outside the
 * temp home (PI_*, ANON_NOTIFY_*, the npm_* an `npm test` run exports). The machine's network setup
 * (CA files, proxies) stays, and npm keeps the user's own config file and cache although HOME moves:
 * `pi install` runs npm, which must reach the registry or its cache as it would for the user.
 */
function isolatedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !/^(PI_|ANON_NOTIFY_|npm_)/i.test(name)) env[name] = value;
  }
  env.npm_config_userconfig = process.env.npm_config_userconfig ?? join(homedir(), ".npmrc");
  env.npm_config_cache = process.env.npm_config_cache ?? join(homedir(), ".npm");
  return env;
}

/**
 * A fresh agent folder whose models.json registers the stub as provider `stub` (model `stub-1`),
 * made the default in settings.json, so `pi -p "task"` talks to the stub and nothing else.
 */
export function makePiHome(model: StubModel, root = mkdtempSync(join(tmpdir(), "anon-notify-cli-"))): PiHome {
  const agentDir = join(root, "agent");
  const cwd = join(root, "work");
  const home = join(root, "home");
  for (const dir of [agentDir, cwd, home]) mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(agentDir, "models.json"),
    JSON.stringify({
      providers: {
        [STUB_PROVIDER]: {
          baseUrl: model.baseUrl,
          api: "openai-completions",
          apiKey: STUB_API_KEY,
          models: [{ id: STUB_MODEL_ID, contextWindow: 128_000, maxTokens: 4096 }],
        },
      },
    }),
  );
  writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ defaultProvider: STUB_PROVIDER, defaultModel: STUB_MODEL_ID }));
  return {
    root,
    agentDir,
    cwd,
    env: {
      ...isolatedEnv(),
      PATH: [join(REPO, "node_modules/.bin"), process.env.PATH ?? ""].join(delimiter),
      HOME: home,
      PI_CODING_AGENT_DIR: agentDir,
      PI_OFFLINE: "1",
      PI_SKIP_VERSION_CHECK: "1",
      NO_COLOR: "1",
    },
    dispose: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** A stub model and a Pi home using it, for one test: both go when it ends, after `alsoClose` (the test's server). */
export async function stubbedPiHome(
  t: { after(fn: () => Promise<void>): void },
  alsoClose: () => Promise<unknown> | unknown = () => {},
): Promise<{ model: StubModel; home: PiHome }> {
  const model = await startStubModel();
  let home: PiHome | undefined;
  t.after(() => closeAll(model.close, alsoClose, () => home?.dispose()));
  home = makePiHome(model);
  return { model, home };
}

export interface PiRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunPiOptions {
  env?: Record<string, string>;
  stdin?: string;
  /** Liveness bound; a run that outlives it is killed and reported with its output so far. */
  timeoutMs?: number;
}

/** Starts `pi <args>` in the home's cwd; the caller owns the process (RPC mode, interactive tests). */
export function spawnPi(home: PiHome, args: string[], env: Record<string, string> = {}): ChildProcessWithoutNullStreams {
  return spawn(PINNED_NODE, [PI_CLI, ...args], { cwd: home.cwd, env: { ...home.env, ...env } });
}

/** Runs `pi <args>` to completion. */
export async function runPi(home: PiHome, args: string[], options: RunPiOptions = {}): Promise<PiRun> {
  const child = spawnPi(home, args, options.env);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdin.end(options.stdin ?? "");
  const timeoutMs = options.timeoutMs ?? 60_000;
  return await new Promise<PiRun>((resolveRun, rejectRun) => {
    const guard = setTimeout(() => {
      child.kill("SIGKILL");
      rejectRun(new Error(`pi ${args.join(" ")} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.once("error", (error) => {
      clearTimeout(guard);
      rejectRun(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(guard);
      resolveRun({ code, signal, stdout, stderr });
    });
  });
}

/** The stdout/stderr of a run, for assertion messages. */
export function describeRun(run: PiRun): string {
  return `exit ${run.code ?? run.signal}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
}
