/**
 * The one small real HTTP client (undici) for the presence, command and operator routes, as the
 * extension and an operator would call them; tests, bench and the demo all use it. Every answer is
 * returned as status plus parsed body, so callers look at both.
 */
import type { TestContext } from "node:test";
import { fetch, type Dispatcher } from "undici";
import { randomUUID } from "node:crypto";
import type { ApprovalRequest } from "../protocol/approvals.ts";
import type { Heartbeat } from "../protocol/sessions.ts";
import { startKoishi, type KoishiHarness, type KoishiOptions } from "./koishi.ts";

export const OPERATOR_TOKEN = "operator-token-for-tests-0123456789";

export interface Answer {
  status: number;
  // Tests inspect arbitrary JSON answers.
  body: any;
}

/** Where the API is: a Koishi harness, a standalone server, or any base URL with the agents' token. */
export interface ApiTarget {
  /** Ends with the API base path, e.g. `http://127.0.0.1:5140/api/agent-notify/v1`. */
  baseUrl: string;
  /** The agents' token; operator calls pass the operator token instead. */
  token: string;
  /** A shared connection pool, for callers that make many requests. */
  dispatcher?: Dispatcher;
}

export async function call(target: ApiTarget, method: string, path: string, body?: unknown, token = target.token): Promise<Answer> {
  const response = await fetch(target.baseUrl + path, {
    method,
    ...(target.dispatcher ? { dispatcher: target.dispatcher } : {}),
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

export function heartbeatOf(overrides: Partial<Heartbeat> = {}): Heartbeat {
  return {
    session_id: "s-1",
    runtime_id: "r-1",
    project: "demo",
    model: "faux/model",
    state: "idle",
    supports_images: true,
    command_protocol: 3,
    last_activity_at: new Date().toISOString(),
    ...overrides,
  };
}

/** A `POST /approvals` body as the extension sends it for `rm -rf build` in session s-1, due in 10 minutes. */
export function approvalRequestOf(overrides: Partial<ApprovalRequest> = {}): ApprovalRequest {
  const now = new Date();
  return {
    approval_id: `ap-${randomUUID()}`,
    session_id: "s-1",
    runtime_id: "r-1",
    run_id: "r-1.run.1",
    tool_call_id: "call-1",
    args_digest: "a".repeat(64),
    cwd: "/home/u/proj",
    tool: "bash",
    action: "rm -rf",
    action_code: "rm-rf",
    reason: "规则 rm-rf",
    command: "rm -rf build",
    command_hidden_chars: 0,
    rules: ["rm-rf"],
    grantable: false,
    source: "policy",
    expires_at: new Date(now.getTime() + 600_000).toISOString(),
    created_at: now.toISOString(),
    ...overrides,
  };
}

export function agentApi(harness: ApiTarget) {
  return {
    heartbeat: (overrides: Partial<Heartbeat> = {}) => call(harness, "POST", "/sessions/heartbeat", heartbeatOf(overrides)),
    offline: (session_id: string, runtime_id: string) => call(harness, "POST", "/sessions/offline", { session_id, runtime_id }),
    claim: (session_id = "s-1", runtime_id = "r-1", options: { images?: boolean; waitMs?: number; lane?: "instructions" | "control" | "host" } = {}) => {
      const query = new URLSearchParams({ session_id, runtime_id });
      if (options.images ?? true) query.set("capabilities", "images");
      if (options.waitMs !== undefined) query.set("wait_ms", String(options.waitMs));
      if (options.lane !== undefined) query.set("lane", options.lane);
      return call(harness, "GET", `/commands?${query}`);
    },
    ack: (command_id: string, lease_token: string, session_id = "s-1", runtime_id = "r-1", outcome?: string) =>
      call(harness, "POST", `/commands/${command_id}/ack`, { session_id, runtime_id, lease_token, ...(outcome === undefined ? {} : { outcome }) }),
  };
}

export function operatorApi(harness: ApiTarget, token = OPERATOR_TOKEN) {
  return {
    sessions: () => call(harness, "GET", "/operator/sessions", undefined, token),
    create: (body: Record<string, unknown>) => call(harness, "POST", "/operator/commands", body, token),
    list: (session_id = "s-1", limit?: number) =>
      call(harness, "GET", `/operator/commands?${new URLSearchParams({ session_id, ...(limit ? { limit: String(limit) } : {}) })}`, undefined, token),
    stop: (session_id = "s-1") => call(harness, "POST", `/operator/sessions/${encodeURIComponent(session_id)}/stop`, {}, token),
    cancel: (command_id: string, session_id = "s-1") => call(harness, "POST", `/operator/commands/${command_id}/cancel`, { session_id }, token),
    mute: () => call(harness, "GET", "/operator/mute", undefined, token),
    muteSet: (body: Record<string, unknown>) => call(harness, "POST", "/operator/mute", body, token),
    unmute: (body: Record<string, unknown>) => call(harness, "DELETE", "/operator/mute", body, token),
    audit: (query: Record<string, string> = {}) => call(harness, "GET", `/operator/audit?${new URLSearchParams(query)}`, undefined, token),
  };
}

/** A real Koishi app with the operator API on; stopped (and its temp folder removed) by the caller. */
export function startServer(options: KoishiOptions = {}): Promise<KoishiHarness> {
  return startKoishi({ ...options, config: { operatorToken: OPERATOR_TOKEN, ...options.config } });
}

/** A server with the operator API on and session `s-1` (runtime `r-1`) online, stopped after the test. */
export async function onlineServer(t: TestContext, options: KoishiOptions = {}) {
  const server = await startServer(options);
  t.after(() => server.stop());
  const agent = agentApi(server);
  await agent.heartbeat();
  return { server, agent, operator: operatorApi(server) };
}
