/** An approval's action in the page's language (common/action-label.ts), never the session's words passed off as the page's. Pure. */
import { actionLabel, type WordedAction } from "../../common/action-label.ts";
import type { ConsoleApproval } from "../../server/console/decisions.ts";

/** The page's message keys of the actions it words itself. */
const KEYS: Record<WordedAction, string> = { opaque: "opaque", "disk-write": "diskWrite", "write-outside-project": "writeOutsideProject" };

export function actionText(
  approval: Pick<ConsoleApproval, "source" | "action" | "action_code"> & { rules?: readonly string[] },
  t: (key: string, params?: Record<string, string>) => string,
): string {
  const label = actionLabel(approval);
  switch (label.kind) {
    case "words":
      return label.words;
    case "worded":
      return t(`action.${KEYS[label.code]}`);
    case "rule":
      return t("action.rule", { label: label.label });
    case "model":
      return label.text;
    case "agent":
      return t("action.agent", { label: label.text });
    case "unknown":
      return t("action.unknown");
  }
}
