/** Why a run failed, by `details.failure_reason`, in both languages: one table for the Pi side's notices and the console page. */
import type { FailureReason } from "../protocol/said.ts";

export type { FailureReason };

export const FAILURE_WORDS: Record<"zh-CN" | "en-US", Record<FailureReason, string>> = {
  "zh-CN": {
    length: "回复达到长度上限而被截断",
    error: "模型请求出错",
    incomplete_tool_batch: "最终工具批次没有全部执行完",
    tool_error_in_final_batch: "最终工具批次中有工具出错",
    non_terminating_tool_batch: "最终工具批次没有声明结束",
    unexpected_stop_reason: "以未知的停止原因结束",
    turn_limit: "达到本次运行的轮数上限，已被停止",
    time_limit: "达到本次运行的时长上限，已被停止",
  },
  "en-US": {
    length: "the reply was cut off at the length limit",
    error: "the model request failed",
    incomplete_tool_batch: "the final tool batch did not run to the end",
    tool_error_in_final_batch: "a tool in the final batch failed",
    non_terminating_tool_batch: "the final tool batch did not say it was done",
    unexpected_stop_reason: "it stopped for an unknown reason",
    turn_limit: "it reached the run's turn limit and was stopped",
    time_limit: "it reached the run's time limit and was stopped",
  },
};
