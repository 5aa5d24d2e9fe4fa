/** The link to the server: the real cause of a failure, outages and their end, and what stays quiet. Pure, table-driven. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { LINK_UNKNOWN, linkStep, quietFailure, serverCause, type LinkSignal, type LinkState } from "../../extension/server-client/decisions.ts";
import { classifyHttpFailure, ServerError } from "../../extension/server-client/retry.ts";
import { messagesFor } from "../../extension/texts/messages.ts";

const http = (status: number, code?: string) => classifyHttpFailure(status, {}, 0, code);
const refused = new ServerError("POST sessions/heartbeat failed: ECONNREFUSED connect ECONNREFUSED", { retryable: true, code: "ECONNREFUSED" });
const timeout = new ServerError("no answer within 10000 ms", { retryable: true, code: "timeout" });
const invalid = new ServerError("HTTP 200 with an invalid answer", { retryable: false, status: 200, code: "invalid_answer" });

test("serverCause names what stands in the way, not the status code alone", () => {
  const rows: [string, ServerError, boolean, ReturnType<typeof serverCause>][] = [
    ["401 with no token here", http(401, "unauthorized"), false, "no_token"],
    ["401 with a token", http(401, "unauthorized"), true, "token_refused"],
    ["connection refused", refused, true, "no_answer"],
    ["no answer in time", timeout, true, "no_answer"],
    ["a 404 without our error code: no such route", http(404), true, "not_our_server"],
    ["an answer that is not ours", invalid, true, "not_our_server"],
    ["a 503", http(503, "not_ready"), true, "server_error"],
    ["a 404 for a missing event is an answer", http(404, "not_found"), true, null],
    ["a 409 session_offline is an answer", http(409, "session_offline"), true, null],
  ];
  for (const [label, error, hasToken, cause] of rows) assert.equal(serverCause(error, hasToken), cause, label);
});

test("the causes are worded in both languages, naming the endpoint", () => {
  const endpoint = "http://127.0.0.1:5140/api/agent-notify/v1/events";
  assert.equal(messagesFor("en-US").link.cause.no_token(endpoint), `${endpoint} answered, but there is no token here (HTTP 401)`);
  assert.equal(messagesFor("zh-CN").link.cause.no_token(endpoint), `${endpoint} 有应答，但本机没有令牌（HTTP 401）`);
  assert.equal(messagesFor("en-US").link.cause.not_our_server(endpoint, "HTTP 404"), `${endpoint} is not the notify server (HTTP 404): check the endpoint URL`);
});

test("linkStep: down at the first failure that is the server being away, back (with how long) at its first answer", () => {
  const up: LinkState = { phase: "up", since: 0 };
  const down: LinkState = { phase: "down", since: 1_000 };
  const failed = (error: ServerError): LinkSignal => ({ kind: "failed", error });
  const rows: [string, LinkState, LinkSignal, LinkState, number | undefined][] = [
    ["first answer", LINK_UNKNOWN, { kind: "answered" }, { phase: "up", since: 5_000 }, undefined],
    ["refused while up", up, failed(refused), { phase: "down", since: 5_000 }, undefined],
    ["refused before any answer", LINK_UNKNOWN, failed(refused), { phase: "down", since: 5_000 }, undefined],
    ["a 5xx while up", up, failed(http(502)), { phase: "down", since: 5_000 }, undefined],
    ["a restarting server's missing route while up", up, failed(http(404)), { phase: "down", since: 5_000 }, undefined],
    ["a missing route before any answer: a wrong URL, not an outage", LINK_UNKNOWN, failed(http(404)), LINK_UNKNOWN, undefined],
    ["still down", down, failed(http(404)), down, undefined],
    ["back", down, { kind: "answered" }, { phase: "up", since: 5_000 }, 4_000],
    ["a refusal is an answer too: back", down, failed(http(409, "session_offline")), { phase: "up", since: 5_000 }, 4_000],
    ["a refused token is an answer", LINK_UNKNOWN, failed(http(401, "unauthorized")), { phase: "up", since: 5_000 }, undefined],
    ["a missing event is an answer", up, failed(http(404, "not_found")), up, undefined],
  ];
  for (const [label, state, signal, next, back] of rows) {
    const step = linkStep(state, signal, 5_000);
    assert.deepEqual(step.state, next, label);
    assert.equal(step.back, back, label);
  }
});

test("quietFailure: the outage itself, a refused token and a forgotten runtime need no warning; anything else does", () => {
  const up: LinkState = { phase: "up", since: 0 };
  const down: LinkState = { phase: "down", since: 0 };
  const rows: [string, ServerError, LinkState, boolean][] = [
    ["refused while down", refused, down, true],
    ["a restart's 404 while down", http(404), down, true],
    ["a 409 session_offline after a restart", http(409, "session_offline"), up, true],
    ["a refused token", http(401, "unauthorized"), up, true],
    ["a wrong URL before any answer", http(404), LINK_UNKNOWN, false],
    ["a 400", http(400, "invalid_request"), up, false],
    ["a 429 while up", http(429, "rate_limited"), up, false],
  ];
  for (const [label, error, state, quiet] of rows) assert.equal(quietFailure(error, state), quiet, label);
});
