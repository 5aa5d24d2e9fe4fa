/**
 * The trigger routes at the HTTP edge, on a real Koishi app with no host online (so nothing can
 * start): the generic route's headers, what is refused before anything is stored, the breaker
 * pausing the trigger, and the owner's notices in English.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { fetch } from "undici";
import { type ChatHarness, startChat } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";

const SECRET = "generic-secret-0123456789";
const GITHUB_SECRET = "github-secret-0123456789";

async function server(t: { after(fn: () => Promise<void>): void }): Promise<ChatHarness> {
  const harness = await startChat({
    locales: ["en-US"],
    config: {
      triggers: [
        {
          name: "ci",
          secret: SECRET,
          projects: [{ repository: "octo-org/shop", project: "shop" }],
          actors: ["*"],
          events: ["build.failed"],
          runsPerKeyPerHour: 2,
        },
        { name: "github", secret: GITHUB_SECRET, projects: [{ repository: "octo-org/shop", project: "shop" }], actors: ["alice"] },
      ] as never,
    },
  });
  t.after(() => harness.stop());
  return harness;
}

interface Post {
  name?: string;
  body?: string | Buffer;
  secret?: string;
  headers?: Record<string, string>;
}

async function post(harness: ChatHarness, { name = "ci", body = "{}", secret = SECRET, headers = {} }: Post) {
  const raw = Buffer.from(body);
  const response = await fetch(`${harness.baseUrl}/triggers/${name}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-anon-delivery": randomUUID(),
      [name === "github" ? "x-hub-signature-256" : "x-anon-signature-256"]: `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`,
      ...headers,
    },
    body: raw,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const build = (number: number) =>
  JSON.stringify({ event: "build", action: "failed", repository: "octo-org/shop", number, actor: "ci-runner", title: "main is red" });

async function told(harness: ChatHarness, text: string) {
  await waitUntil(
    () => harness.sent.some((m) => m.text.includes(text)),
    () => `the owner told "${text}"\n${harness.sent.map((m) => m.text).join("\n---\n")}`,
    30_000,
  );
}

test("the generic route takes its own headers; what is not signed, not a delivery or too large is refused before anything is stored", async (t) => {
  const harness = await server(t);
  const ok = await post(harness, { body: build(1) });
  assert.deepEqual([ok.status, ok.body.state], [202, "queued"]);
  // No host is online: the start is refused, and the owner reads why.
  await told(harness, "could not start a session in shop for octo-org/shop#1 (build.failed by ci-runner");
  await told(harness, "host_offline");

  const rows: [string, Post, number, string][] = [
    ["unknown trigger", { name: "nope", body: build(1) }, 404, "not_found"],
    ["wrong secret", { body: build(1), secret: "wrong-secret-00000000" }, 401, "unauthorized"],
    [
      "GitHub's header on the generic route",
      { body: build(1), headers: { "x-anon-signature-256": "", "x-hub-signature-256": "sha256=00" } },
      401,
      "unauthorized",
    ],
    ["no delivery id", { body: build(1), headers: { "x-anon-delivery": "" } }, 400, "invalid_request"],
    ["a delivery id that is not an id", { body: build(1), headers: { "x-anon-delivery": "a b" } }, 400, "invalid_request"],
    ["signed, not JSON", { body: "{" }, 400, "invalid_json"],
    ["signed, not the shape", { body: JSON.stringify({ event: "build", repository: "octo-org/shop", actor: "x", extra: 1 }) }, 400, "invalid_request"],
    ["over 1 MiB", { body: Buffer.alloc(1024 * 1024 + 1, 32) }, 413, "payload_too_large"],
  ];
  for (const [why, request, status, error] of rows) {
    const answer = await post(harness, request);
    assert.deepEqual([answer.status, answer.body.error], [status, error], why);
  }
  // Two unsigned requests, one notice: strangers cannot flood the owner.
  await told(harness, "Trigger ci refused a request from");
  assert.equal(harness.sent.filter((m) => m.text.includes("Trigger ci refused a request from")).length, 1);

  const ping = await post(harness, {
    name: "github",
    secret: GITHUB_SECRET,
    body: JSON.stringify({ zen: "Keep it logically awesome." }),
    headers: { "x-github-event": "ping", "x-github-delivery": "p-1" },
  });
  assert.deepEqual([ping.status, ping.body], [200, { state: "ignored", delivery: "p-1" }]);
});

test("the breaker: a key past its runs in an hour pauses the whole trigger, and the owner is told until when", async (t) => {
  const harness = await server(t);
  for (const _ of [1, 2]) assert.equal((await post(harness, { body: build(7) })).status, 202);
  const tripped = await post(harness, { body: build(7) });
  assert.equal(tripped.body.guard, "breaker");
  await told(harness, "octo-org/shop#7 already had 2 runs in the last hour; the breaker paused the trigger until");
  const other = await post(harness, { body: build(8) });
  assert.equal(other.body.guard, "paused", "another key of the same trigger is held too");
  await told(harness, "the trigger is paused by its breaker until");
  const github = await post(harness, {
    name: "github",
    secret: GITHUB_SECRET,
    body: JSON.stringify({
      action: "opened",
      repository: { full_name: "octo-org/shop" },
      sender: { login: "alice", type: "User" },
      pull_request: { number: 1, title: "t" },
    }),
    headers: { "x-github-event": "pull_request", "x-github-delivery": "g-1" },
  });
  assert.equal(github.body.state, "queued", "another trigger is not paused");
});
