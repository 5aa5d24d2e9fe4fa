/** How a notice's status is named in the texts people read (direct notices, mute digests). Pure. */
import type { EventStatus } from "../../protocol/events.ts";

export const STATUS_LABELS: Record<EventStatus, string> = {
  started: "开始",
  progress: "进展",
  completed: "完成",
  failed: "失败",
  tool_error: "工具错误",
  warning: "警告",
  info: "信息",
};
