/** An approval's action in the page's language (common/action-label.ts), never the session's words passed off as the page's. Pure. */
import { actionLabel, type WordedAction } from "../../common/action-label.ts";
import type { ConsoleApproval } from "../../server/console/decisions.ts";
import type { RuleSite } from "../../common/rule-sites.ts";

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

/** Every rule with where it matched (common/rule-sites.ts), in the page's words. */
export function sitesText(sites: readonly RuleSite[], t: (key: string, params?: Record<string, string>) => string): string {
  return sites
    .map(({ rule, line, col, at }) => {
      if (line !== undefined) return t(col === 1 ? "site.line" : "site.place", { rule, line: String(line), col: String(col) });
      return at === undefined ? rule : t("site.text", { rule, at });
    })
    .join("; ");
}
