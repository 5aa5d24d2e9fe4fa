/** The page's calls to its server listeners (`anon-notify/*`), answered in the console's answer shape. */
import { send } from "@koishijs/client";
import type { ConsoleAnswer } from "../../server/console/actions.ts";

// Without a connection (or from a retired copy of the page, below) `send` answers nothing: that is an answer too.
export async function call<T>(type: string, input: unknown): Promise<ConsoleAnswer<T>> {
  if (isRetired()) return { ok: false, error: "disconnected" };
  const answer = await (send as unknown as (type: string, input: unknown) => Promise<ConsoleAnswer<T>> | undefined)(type, input);
  return answer ?? { ok: false, error: "disconnected" };
}

/** Koishi's client reloads the page's modules at every reconnect while `<keep-alive>` keeps the old copy alive,
 * and a retired copy must ask the server nothing. */
let retired = false;
export const isRetired = (): boolean => retired;
export function retire(): void {
  retired = true;
}
