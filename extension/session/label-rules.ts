/** How a session is named to the outside, one rule each, so the persona, the server and the app never see one session under two names. */
import { LIMITS } from "../../protocol/wire.ts";

/** A directory basename only: the server, the persona and the app never learn the full path. */
export function projectName(cwd: string): string {
  // Split on both separators: a Windows cwd reported to a Linux server is still cut to its last part.
  const name =
    cwd
      .split(/[\\/]+/)
      .filter(Boolean)
      .at(-1) ?? "";
  return (name || "root").slice(0, LIMITS.projectChars);
}

export function modelLabel(model: { provider: string; id: string } | undefined): string | null {
  return model ? `${model.provider}/${model.id}` : null;
}

/** Whether the model can see images: only then do heartbeats and claims declare image support (Pi swaps images for a placeholder otherwise). */
export function modelSupportsImages(model: { input: readonly string[] } | undefined): boolean {
  return model?.input.includes("image") ?? false;
}
