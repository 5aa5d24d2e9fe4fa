/** The approval buttons' capabilities: one per push and answer, kept as hashes, redeemed at most once
 * through the same decision as `anon.approve`. */
import { createHash, randomBytes } from "node:crypto";
import type { ApprovalDecision } from "../../protocol/approvals.ts";
import type { PushAnswer } from "../../protocol/push.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import type { ApprovalService } from "../approvals/service.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { PushStore } from "./store.ts";

const CAPABILITY = /^[A-Za-z0-9_-]{43}$/;
/** Who decided, on the approval and its audit rows. */
const NTFY_DECIDER = { actor: "operator", name: "ntfy" } as const;

const hashOf = (capability: string) => createHash("sha256").update(capability).digest("hex");

export interface PushAnswersDeps {
  store: PushStore;
  approvals: Pick<ApprovalService, "decide">;
  /** The server's public base URL, e.g. `https://pi.example.com`. */
  publicUrl: string;
  now?: () => Date;
}

export class PushAnswers {
  readonly #deps: PushAnswersDeps;

  constructor(deps: PushAnswersDeps) {
    this.#deps = deps;
  }

  /** A new single-use answer URL for one approval and one decision, valid until `expiresAt`. */
  async mint(approvalId: string, decision: ApprovalDecision, expiresAt: Date): Promise<string> {
    const capability = randomBytes(32).toString("base64url");
    await this.#deps.store.addAnswer({ hash: hashOf(capability), approval_id: approvalId, decision, expires_at: expiresAt, used_at: null });
    const base = this.#deps.publicUrl.replace(/\/+$/, "");
    return `${base}${API_BASE_PATH}/push/answer/${capability}`;
  }

  /** A press: `not_found` for an unknown, used or expired capability (or an approval that has
   * ended), `already_decided` when someone answered first; otherwise the approval is decided. */
  async redeem(capability: string): Promise<PushAnswer> {
    const { store, approvals } = this.#deps;
    const now = this.#deps.now?.() ?? new Date();
    if (!CAPABILITY.test(capability)) throw new DomainError("not_found");
    const hash = hashOf(capability);
    const row = await store.answer(hash);
    if (!row || row.used_at !== null || now.getTime() >= new Date(row.expires_at).getTime()) throw new DomainError("not_found");
    if (!(await store.redeem(hash, now))) throw new DomainError("not_found");
    try {
      const { approval } = await approvals.decide({ ref: row.approval_id, decision: row.decision, decider: NTFY_DECIDER, via: "ntfy" });
      return { code: approval.code, decision: row.decision, state: approval.state };
    } catch (error) {
      if (!(error instanceof DomainError)) {
        await store.release(hash);
        throw error;
      }
      if (error.code === "already_decided") throw error;
      throw new DomainError("not_found");
    }
  }
}
