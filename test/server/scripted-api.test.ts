/**
 * The stand-in queue (test/helpers/scripted-api.ts) that the extension's command tests talk to,
 * checked against the real server: one table of steps, run on both, each answer compared with what
 * the table says. A stand-in that drifts from the server's queue (a claim it would not hand out, a
 * hold it would not keep, an ACK status it would not give) fails here, not in a Pi test that
 * happens to pass against it.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { agentApi, onlineServer, type ApiTarget } from "../../harness/agent-api.ts";
import type { CommandLane } from "../../protocol/queue.ts";
import { COMMAND_TABLE } from "../../server/queue/table.ts";
import { command, startScriptedApi } from "../helpers/scripted-api.ts";
import { imageOf } from "./images.ts";

type Step =
  | { do: "instruct"; name: string; image?: boolean }
  | { do: "stop"; name: string }
  /** `held`: a long poll, with the instruction `name` queued while it waits. */
  | { do: "claim"; lane?: CommandLane; images?: boolean; runtime?: string; held?: string; expect: string }
  | { do: "ack"; name: string; token?: "wrong"; outcome?: string; expect: string }
  /** The command's lease runs out (nobody has claimed it since). */
  | { do: "expire"; name: string };

const STEPS: readonly Step[] = [
  { do: "claim", expect: "none" },
  { do: "instruct", name: "a" },
  { do: "instruct", name: "b" },
  { do: "claim", expect: "a" },
  { do: "claim", expect: "none" }, // a's unexpired lease holds the lane: commands arrive in order
  { do: "ack", name: "a", token: "wrong", expect: "409 lease_mismatch" },
  { do: "ack", name: "a", expect: "200" },
  { do: "ack", name: "a", expect: "200" }, // a repeat is answered alike
  { do: "claim", expect: "b" },
  { do: "expire", name: "b" },
  { do: "ack", name: "b", expect: "200" }, // a late ACK of an expired lease nobody took since: it was delivered
  { do: "instruct", name: "c", image: true },
  { do: "claim", images: false, expect: "none" }, // never an image to a client that cannot show it
  { do: "claim", expect: "c" },
  { do: "ack", name: "c", expect: "200" },
  { do: "stop", name: "s" },
  { do: "claim", expect: "none" }, // a stop goes out on the control lane only
  { do: "claim", lane: "control", expect: "s" },
  { do: "ack", name: "s", expect: "400 invalid_request" }, // a control command's ACK says what happened
  { do: "ack", name: "s", outcome: "already_idle", expect: "200" },
  { do: "claim", runtime: "r-2", expect: "409 session_offline" },
  { do: "ack", name: "unknown", expect: "404 not_found" },
  { do: "claim", held: "d", expect: "d" }, // an idle session's held claim is woken by a new command
];

/** One queue behind the agent routes, and the ways a test puts commands in it. */
interface Target {
  api: ApiTarget;
  instruct(name: string, image: boolean): Promise<string>;
  stop(name: string): Promise<string>;
  expire(commandId: string): Promise<void>;
}

async function realServer(t: TestContext): Promise<Target> {
  const { server, operator } = await onlineServer(t);
  return {
    api: server,
    instruct: async (name, image) =>
      (await operator.create({ session_id: "s-1", instruction: name, ...(image ? { images: [imageOf("image/png", 128, 7)] } : {}) })).body.command.command_id,
    stop: async () => (await operator.stop()).body.command.command_id,
    expire: async (commandId) => {
      await server.app.database.set(COMMAND_TABLE, { command_id: commandId }, { lease_expires_at: new Date(Date.now() - 1_000) });
    },
  };
}

async function standIn(t: TestContext): Promise<Target> {
  const scripted = await startScriptedApi({ commandProtocol: 3 });
  t.after(() => scripted.close());
  const api = { baseUrl: scripted.endpoint.slice(0, -"/events".length), token: scripted.token };
  await agentApi(api).heartbeat();
  return {
    api,
    instruct: async (name, image) => {
      scripted.enqueue(command(`c-${name}`, name, image ? { images: [imageOf("image/png", 128, 7)] } : {}));
      return `c-${name}`;
    },
    stop: async (name) => {
      scripted.enqueue(command(`c-${name}`, "", { kind: "stop", payload: {} }));
      return `c-${name}`;
    },
    expire: async (commandId) => scripted.expireLease(commandId),
  };
}

/** Runs the table on one target; each answer as the table words it (a command by its name, a refusal by status and code). */
async function run(target: Target): Promise<string[]> {
  const agent = agentApi(target.api);
  const ids = new Map<string, string>([["unknown", "c-unknown"]]);
  const leases = new Map<string, string>();
  const names = () => new Map([...ids].map(([name, id]) => [id, name]));
  const answers: string[] = [];
  for (const step of STEPS) {
    if (step.do === "instruct") ids.set(step.name, await target.instruct(step.name, step.image ?? false));
    else if (step.do === "stop") ids.set(step.name, await target.stop(step.name));
    else if (step.do === "expire") await target.expire(ids.get(step.name)!);
    else if (step.do === "claim") {
      const claiming = agent.claim("s-1", step.runtime ?? "r-1", {
        images: step.images ?? true,
        lane: step.lane ?? "instructions",
        waitMs: step.held ? 20_000 : 0,
      });
      if (step.held) ids.set(step.held, await target.instruct(step.held, false));
      const { status, body } = await claiming;
      if (status !== 200) answers.push(`${status} ${body.error}`);
      else if (!body.command) answers.push("none");
      else {
        leases.set(body.command.command_id, body.lease.token);
        answers.push(names().get(body.command.command_id) ?? body.command.command_id);
      }
    } else {
      const id = ids.get(step.name)!;
      const token = step.token === "wrong" ? "not-the-lease" : (leases.get(id) ?? "no-lease");
      const { status, body } = await agent.ack(id, token, "s-1", "r-1", step.outcome);
      answers.push(status === 200 ? "200" : `${status} ${body.error}`);
    }
  }
  return answers;
}

const expected = STEPS.flatMap((step) => ("expect" in step ? [step.expect] : []));

test("the real server answers the stand-in's table", async (t) => {
  assert.deepEqual(await run(await realServer(t)), expected);
});

test("the stand-in queue answers the same table as the real server", async (t) => {
  assert.deepEqual(await run(await standIn(t)), expected);
});
