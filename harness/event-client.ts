/** Small HTTP helpers for the server tests: real requests on the loopback port, nothing mocked. */
import { randomUUID } from "node:crypto";
import { Receipt, type EventBodyInput } from "../protocol/events.ts";
import type { ApiTarget } from "./agent-api.ts";
import { waitUntil } from "./wait.ts";

export function validEvent(overrides: Partial<Record<keyof EventBodyInput, unknown>> = {}): Record<string, unknown> {
  return {
    event_id: `pi:${randomUUID()}:run:1`,
    session_id: "019a-session",
    runtime_id: "r-1",
    source: "Pi Agent · demo",
    task: "修复登录页",
    status: "completed",
    summary: "已完成",
    details: { stop_reason: "stop" },
    url: null,
    context_usage: { used_tokens: 48000, context_window: 200000, percent: 24 },
    created_at: new Date().toISOString(),
    delivery: "anon",
    ...overrides,
  };
}

export async function postEvent(koishi: ApiTarget, body: unknown, headers: Record<string, string> = {}) {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  const response = await fetch(`${koishi.baseUrl}/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${koishi.token}`, "content-type": "application/json", ...headers },
    body: raw,
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

export async function getReceipt(koishi: ApiTarget, eventId: string): Promise<Receipt | undefined> {
  const response = await fetch(`${koishi.baseUrl}/events/${encodeURIComponent(eventId)}`, { headers: { authorization: `Bearer ${koishi.token}` } });
  if (response.status === 404) {
    await response.arrayBuffer();
    return undefined;
  }
  if (response.status !== 200) throw new Error(`GET /events/${eventId}: ${response.status} ${await response.text()}`);
  return Receipt.parse(await response.json());
}

export async function settledReceipt(koishi: ApiTarget, eventId: string): Promise<Receipt> {
  return waitUntil(async () => {
    const receipt = await getReceipt(koishi, eventId);
    return receipt && receipt.state !== "queued" && receipt.state !== "processing" ? receipt : undefined;
  }, `event ${eventId} settled`);
}
