/**
 * The operator service: one in-process implementation of what the persona's tools and the operator
 * HTTP API may do with Pi sessions (list the online ones, queue an instruction, list and cancel
 * queued ones). Errors are `HttpError`s carrying the protocol's codes, so the HTTP routes answer
 * them as they are and the persona tools translate them for the model.
 */
import type { Context } from "koishi";
import { type CommandImage, type CommandOrigin, type CommandSummary } from "../protocol/commands.ts";
import { OperatorCancelBody, OperatorCreateCommand, OperatorListQuery, type OperatorCommandCreated } from "../protocol/operator.ts";
import { type SessionProjection } from "../protocol/sessions.ts";
import { LIMITS } from "../protocol/wire.ts";
import { summarize } from "./command-state.ts";
import type { CommandStore } from "./command-queue.ts";
import { HttpError, json, parseWith, type HttpApi } from "./http.ts";
import { supportsImages, type SessionRegistry } from "./session-registry.ts";

export interface OperatorDeps {
  registry: SessionRegistry;
  commands: CommandStore;
  /** The session a received notice event belongs to; `undefined` when no such event exists. */
  eventSession(eventId: string): Promise<string | undefined>;
}

export interface CommandRequest {
  session_id: string;
  /** Present: an answer to that notice (`agent_command`). Absent: a message to an online session. */
  event_id?: string | undefined;
  instruction: string;
  images?: CommandImage[] | undefined;
  /** Already namespaced by the surface it came from; `null` means no idempotency. */
  request_key: string | null;
  origin: CommandOrigin;
}

export class OperatorService {
  readonly #deps: OperatorDeps;

  constructor(deps: OperatorDeps) {
    this.#deps = deps;
  }

  sessions(): SessionProjection[] {
    return this.#deps.registry.list();
  }

  /**
   * Queues an instruction. With an event id the notice must belong to the session, which may be
   * offline (the queue keeps it); without one the session must be online now, and an offline one
   * is refused, never queued for a later start. A repeated request key returns the stored command
   * before any of these checks, so a retry after the session went away still gets its answer.
   */
  async createCommand(request: CommandRequest): Promise<OperatorCommandCreated> {
    const { registry, commands, eventSession } = this.#deps;
    const images = request.images ?? [];
    const admit = async () => {
      const live = registry.find(request.session_id);
      if (request.event_id !== undefined) {
        const owner = await eventSession(request.event_id);
        if (owner === undefined) throw new HttpError(404, "not_found");
        if (owner !== request.session_id) throw new HttpError(409, "event_session_mismatch");
      } else if (!live) {
        throw new HttpError(409, "session_offline");
      }
      // A client known not to take images would leave the command pending forever.
      if (images.length > 0 && live && !supportsImages(live.heartbeat)) throw new HttpError(409, "images_not_supported");
    };
    const { record, duplicate } = await commands.create(
      {
        session_id: request.session_id,
        event_id: request.event_id ?? null,
        origin: request.origin,
        instruction: request.instruction,
        images,
        request_key: request.request_key,
      },
      admit,
    );
    return { command: summarize(record), duplicate };
  }

  /** Works for offline sessions too: what is stored can always be looked at. */
  commands(sessionId: string, limit: number): Promise<CommandSummary[]> {
    return this.#deps.commands.list(sessionId, limit);
  }

  cancel(sessionId: string, commandId: string): Promise<CommandSummary> {
    return this.#deps.commands.cancel(sessionId, commandId);
  }
}

export interface OperatorRoutesDeps {
  api: HttpApi;
  operator: OperatorService;
}

/** The same operations for people and scripts, under `/operator/`, with the operator token. */
export const OperatorRoutes = {
  name: "notify-webhook-operator",
  reusable: true,
  apply(ctx: Context, { api, operator }: OperatorRoutesDeps) {
    api.route(ctx, { method: "GET", path: "/operator/sessions", auth: "operator" }, () => json(200, { sessions: operator.sessions() }));

    api.route(ctx, { method: "POST", path: "/operator/commands", auth: "operator", maxBytes: LIMITS.operatorBodyBytes }, async (request) => {
      const body = parseWith(OperatorCreateCommand, request.body);
      const created = await operator.createCommand({
        ...body,
        request_key: body.request_key === undefined ? null : `operator:${body.request_key}`,
        origin: "operator",
      });
      return json(created.duplicate ? 200 : 201, created);
    });

    api.route(ctx, { method: "GET", path: "/operator/commands", auth: "operator" }, async (request) => {
      const query = parseWith(OperatorListQuery, Object.fromEntries(request.query));
      return json(200, { commands: await operator.commands(query.session_id, query.limit) });
    });

    api.route(ctx, { method: "POST", path: "/operator/commands/:command_id/cancel", auth: "operator" }, async (request) => {
      const body = parseWith(OperatorCancelBody, request.body);
      await operator.cancel(body.session_id, request.params.command_id ?? "");
      return json(200, { state: "cancelled" });
    });
  },
};
