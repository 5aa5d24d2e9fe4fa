/** `TriggerService`: a signed delivery is checked, stored and judged by the guards before the answer; the
 * accepted ones then start, resume or continue their key's session, and the owner is told what each came to. */
import { errorText } from "../../common/errors.ts";
import { DomainError } from "../../common/domain-error.ts";
import { Turns } from "../../common/turns.ts";
import type { DeliveryRoute } from "../../protocol/events.ts";
import type { StartResult } from "../../protocol/hosts.ts";
import { GITHUB_TRIGGER, type KeyMapping, TriggerDelivery, type TriggerAnswer } from "../../protocol/triggers.ts";
import { Id, wireIssues } from "../../protocol/wire.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventIntake } from "../events/intake.ts";
import type { HostRegistry } from "../hosts/registry.ts";
import type { StartService } from "../hosts/service.ts";
import type { Say } from "../locales/load.ts";
import type { CommandStore } from "../queue/store.ts";
import type { SessionRegistry } from "../sessions/registry.ts";
import type { TriggerConfig } from "./config-rules.ts";
import { type NoticeSubject, type TriggerFact, triggerNotice } from "./notice-rules.ts";
import type { TriggerStore } from "./store.ts";
import {
  BREAKER_PAUSE_MS,
  admit,
  fromGitHub,
  keyOf,
  limitGuard,
  planFor,
  projectFor,
  refusalCounts,
  signatureMatches,
  triggerPrompt,
  type KeySession,
} from "./trigger-rules.ts";

const DAY_MS = 24 * 60 * 60_000;
/** An unsigned request is told to the owner at most this often per trigger: strangers can send many. */
const UNSIGNED_NOTICE_MS = 60 * 60_000;

export interface TriggerDeps {
  triggers: readonly TriggerConfig[];
  store: TriggerStore;
  starts: StartService;
  commands: CommandStore;
  registry: SessionRegistry;
  hosts: HostRegistry;
  intake: EventIntake;
  audit: AuditLog;
  say: Say;
  delivery: DeliveryRoute;
  log: (line: string) => void;
  now?: () => Date;
}

type Header = (name: string) => string | undefined;

/** A delivery past its signature, with the facts every notice about it names. */
type Received = { trigger: TriggerConfig; id: string; deliveryId: string; delivery: TriggerDelivery; subject: NoticeSubject };

export class TriggerService {
  readonly #deps: TriggerDeps;
  readonly #now: () => Date;
  readonly #byName: ReadonlyMap<string, TriggerConfig>;
  /** Per trigger: guards, counts and the insert decided one delivery at a time. */
  readonly #triggerTurns = new Turns();
  /** Per key: one delivery at a time decides what the key's session is. */
  readonly #keyTurns = new Turns();
  readonly #unsignedToldAt = new Map<string, number>();

  constructor(deps: TriggerDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? (() => new Date());
    this.#byName = new Map(deps.triggers.map((t) => [t.name, t]));
  }

  /** The trigger whose secret signed `raw`; anything else is `unauthorized` (an unknown name `not_found`). */
  verify(name: string, header: Header, raw: Buffer, address: string): TriggerConfig {
    const trigger = this.#trigger(name);
    const signature = header(name === GITHUB_TRIGGER ? "x-hub-signature-256" : "x-anon-signature-256");
    if (signatureMatches(trigger.secret, raw, signature)) return trigger;
    void this.#deps.audit.record({ actor: "server", action: "trigger.unsigned", data: { trigger: name, address } });
    const last = this.#unsignedToldAt.get(name);
    const nowMs = this.#now().getTime();
    if (last === undefined || nowMs - last >= UNSIGNED_NOTICE_MS) {
      this.#unsignedToldAt.set(name, nowMs);
      void this.#tell({ trigger: name, delivery: "", key: "", event: "", actor: "", url: null }, { kind: "unsigned", address });
    }
    throw new DomainError("unauthorized");
  }

  /** Stores and judges a verified delivery; an accepted one is worked on after this answers. */
  async accept(trigger: TriggerConfig, header: Header, body: unknown): Promise<TriggerAnswer> {
    const github = trigger.name === GITHUB_TRIGGER;
    const idHeader = github ? "X-GitHub-Delivery" : "X-Anon-Delivery";
    const deliveryId = Id.safeParse(header(idHeader));
    if (!deliveryId.success)
      throw new DomainError("invalid_request", { issues: [{ path: idHeader, message: "must be the delivery's id (1-128 of A-Z a-z 0-9 . _ : -)" }] });
    const event = github ? (header("x-github-event") ?? "") : "";
    if (github && event === "ping") return { state: "ignored", delivery: deliveryId.data };
    const parsed = github ? fromGitHub(event, body) : TriggerDelivery.safeParse(body);
    if (!parsed.success) throw new DomainError("invalid_request", { issues: wireIssues(parsed.error) });
    const delivery = parsed.data;
    const subject = {
      trigger: trigger.name,
      delivery: deliveryId.data,
      key: keyOf(delivery),
      event: delivery.action === null ? delivery.event : `${delivery.event}.${delivery.action}`,
      actor: delivery.actor,
      url: delivery.url,
    };
    const received = { trigger, id: `${trigger.name}:${deliveryId.data}`, deliveryId: deliveryId.data, delivery, subject };
    const answer = await this.#triggerTurns.run(trigger.name, () => this.#judge(received));
    if (answer.state === "queued") void this.#keyTurns.run(`${trigger.name}:${subject.key}`, () => this.#work(received));
    return answer;
  }

  async #judge({ trigger, id, deliveryId, delivery, subject }: Received): Promise<TriggerAnswer> {
    const { store, audit } = this.#deps;
    const now = this.#now();
    const duplicate = async (): Promise<TriggerAnswer> => {
      await audit.record({ actor: "server", action: "trigger.duplicate", subject: id, data: { ...subject } });
      void this.#tell(subject, { kind: "duplicate" });
      return { state: "duplicate", delivery: deliveryId };
    };
    if (await store.has(id)) return duplicate();
    const admitted = admit(delivery, trigger);
    const counts = admitted
      ? undefined
      : {
          trippedAt: await store.trippedSince(trigger.name, new Date(now.getTime() - BREAKER_PAUSE_MS)),
          keyRunsLastHour: await store.countRuns(trigger.name, new Date(now.getTime() - BREAKER_PAUSE_MS), subject.key),
          runsLastDay: await store.countRuns(trigger.name, new Date(now.getTime() - DAY_MS)),
        };
    const guard = admitted ?? limitGuard(counts!, trigger);
    const row = { id, trigger_name: trigger.name, delivery_id: deliveryId, item_key: subject.key, event: subject.event, actor: delivery.actor };
    const stored = await store.insert({ ...row, received_at: now, state: guard ? "refused" : "accepted", guard, outcome: null, session_id: null });
    if (!stored) return duplicate();
    await audit.record({ actor: "server", action: guard ? "trigger.refused" : "trigger.accepted", subject: id, data: { ...subject, guard } });
    if (!guard) return { state: "queued", delivery: deliveryId };
    void this.#tell(subject, { kind: "refused", guard, ...refusalCounts(guard, counts, now) });
    return { state: "refused", delivery: deliveryId, guard };
  }

  /** The owner sends a key's deliveries to an online session by hand, in the key's turn so no delivery is mid-way. */
  async mapKey(name: string, mapping: KeyMapping): Promise<{ trigger: string; key: string; session_id: string; previous: string | null }> {
    const mapped = projectFor(this.#trigger(name), mapping.key.split("#")[0]!);
    if (!mapped) throw new DomainError("invalid_request", { issues: [{ path: "key", message: "names no repository of this trigger" }] });
    const { hosts, store, audit } = this.#deps;
    if (!this.#online(mapping.session_id)) throw new DomainError("session_offline");
    const host = hosts.online().find((h) => h.sessions.includes(mapping.session_id));
    const itemKey = `${name}:${mapping.key}`;
    return this.#keyTurns.run(itemKey, async () => {
      const previous = (await store.key(itemKey))?.session_id ?? null;
      const row = { item_key: itemKey, session_id: mapping.session_id, project: mapped.project, start_command_id: "", updated_at: this.#now() };
      await store.setKey({ ...row, host: host?.name ?? mapped.host ?? "" });
      const answer = { trigger: name, key: mapping.key, session_id: mapping.session_id, previous };
      await audit.record({ actor: "operator", action: "trigger.mapped", subject: itemKey, data: answer });
      return answer;
    });
  }

  /** Works on an accepted delivery; never rejects: what went wrong is logged and told. */
  async #work(received: Received): Promise<void> {
    const { trigger, id, deliveryId, delivery, subject } = received;
    try {
      await this.#act(received);
    } catch (error) {
      this.#failed(trigger, deliveryId, error);
      await this.#deps.store.settle(id, "failed", null).catch(() => {});
      const project = projectFor(trigger, delivery.repository)?.project ?? "";
      void this.#tell(subject, { kind: "start_refused", project, reason: error instanceof DomainError ? error.code : errorText(error) });
    }
  }

  /** Starts, resumes or continues the key's session with the delivery's prompt. */
  async #act({ trigger, id, deliveryId, delivery, subject }: Received): Promise<void> {
    const { store, starts, commands } = this.#deps;
    const itemKey = `${trigger.name}:${subject.key}`;
    const prompt = triggerPrompt(trigger, deliveryId, delivery);
    const plan = planFor(await this.#keySession(itemKey));
    if (plan.kind === "instruct") {
      const instruction = { session_id: plan.sessionId, event_id: null, origin: "operator" as const, instruction: prompt, images: [] };
      const { record } = await commands.create({ ...instruction, request_key: `trigger:${id}` });
      await store.settle(id, plan.joined ? "joined" : "continued", plan.sessionId);
      return void this.#tell(subject, { kind: plan.joined ? "joined" : "continued", sessionId: plan.sessionId, commandId: record.command_id });
    }
    // Strangers' text drives this session: approvals strict, whatever the user's config says.
    const bounds = { limits: { turns: trigger.turns, minutes: trigger.minutes }, approvals: "strict" as const };
    const mapped = projectFor(trigger, delivery.repository)!;
    const request =
      plan.kind === "resume"
        ? { project: plan.session.project, host: plan.session.host || undefined, session_id: plan.session.sessionId, task: prompt, ...bounds }
        : { project: mapped.project, host: mapped.host, task: prompt, ...bounds };
    const queued = await starts.queue(request, "server");
    const { sessionId, host, project, command } = queued;
    await store.setKey({ item_key: itemKey, session_id: sessionId, host, project, start_command_id: command.command_id, updated_at: this.#now() });
    await store.settle(id, plan.kind === "resume" ? "resumed" : "started", sessionId);
    // Waited for outside the key's turn: later deliveries join the pending start meanwhile.
    void starts
      .settle(queued)
      .then((result) => this.#tell(subject, startFact(result, sessionId, plan.kind === "resume")))
      .catch((error: unknown) => this.#failed(trigger, deliveryId, error));
  }

  #failed(trigger: TriggerConfig, deliveryId: string, error: unknown): void {
    this.#deps.log(this.#deps.say("anon-notify.log.trigger-failed", { trigger: trigger.name, delivery: deliveryId, error: errorText(error) }));
  }

  #trigger(name: string): TriggerConfig {
    const trigger = this.#byName.get(name);
    if (!trigger) throw new DomainError("not_found");
    return trigger;
  }

  async #keySession(itemKey: string): Promise<KeySession | undefined> {
    const row = await this.#deps.store.key(itemKey);
    if (!row) return undefined;
    const online = this.#online(row.session_id);
    const job = await this.#deps.commands.summary(row.start_command_id);
    // A job retention removed had long been final; its session is resumed like any ended one.
    const start =
      !job || (job.state === "accepted" && job.outcome === "started") ? "started" : job.state === "pending" || job.state === "leased" ? "pending" : "refused";
    return { sessionId: row.session_id, host: row.host, project: row.project, start, online };
  }

  /** Heartbeating itself, or listed by a host that runs it (a session starting up has not beat yet). */
  #online(sessionId: string): boolean {
    return this.#deps.registry.find(sessionId) !== undefined || this.#deps.hosts.online().some((h) => h.sessions.includes(sessionId));
  }

  async #tell(subject: NoticeSubject, fact: TriggerFact): Promise<void> {
    const { intake, say, delivery, log } = this.#deps;
    try {
      await intake.submit(triggerNotice(subject, fact, this.#now(), delivery, say), { actor: "server" });
    } catch (error) {
      log(say("anon-notify.log.trigger-notice-failed", { trigger: subject.trigger, kind: fact.kind, error: errorText(error) }));
    }
  }
}

function startFact(result: StartResult, sessionId: string, resumed: boolean): TriggerFact {
  if (result.state === "refused") return { kind: "start_refused", project: result.project, reason: result.refusal };
  return { kind: result.state === "started" ? (resumed ? "resumed" : "started") : "queued", sessionId, host: result.host, project: result.project };
}
