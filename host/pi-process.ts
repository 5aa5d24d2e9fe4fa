/** The Pi sessions a host runs: the user's own `pi` in RPC mode with the server's session id,
 * `--anon-notify-on` and the job's limits and approvals, the task as its first prompt. */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { APPROVALS_FLAG, LIMITS_FLAG, START_ON_FLAG } from "../activation.ts";
import type { StartPayload } from "../protocol/hosts.ts";

/** The command that runs Pi: a program and the arguments before Pi's own (e.g. `node cli.js`). */
export type PiCommand = { program: string; args: readonly string[] };

/** The program as an executable path, looked up on PATH when it names no folder; null when there is none. */
export function findProgram(program: string, env: NodeJS.ProcessEnv): string | null {
  const candidates = program.includes("/")
    ? [program]
    : (env.PATH ?? "")
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, program));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not there or not executable: the next one.
    }
  }
  return null;
}

export type RunningSession = { child: ChildProcess; exited: Promise<void> };

/** Starts one session: resolves once Pi answered the prompt command (the task is taken), rejects when Pi exits or refuses it first. Pi's stdout is read only
 * for that answer; the session's notices go to the server through the extension like any session's. */
export function startSession(pi: PiCommand, cwd: string, job: Omit<StartPayload, "project">, env: NodeJS.ProcessEnv): Promise<RunningSession> {
  // `=`: the value is one argument whatever it holds, never taken for the next one.
  const bounds = [
    ...(job.limits ? [`--${LIMITS_FLAG}=${JSON.stringify(job.limits)}`] : []),
    ...(job.approvals ? [`--${APPROVALS_FLAG}=${job.approvals}`] : []),
  ];
  const child = spawn(pi.program, [...pi.args, "--mode", "rpc", "--session-id", job.session_id, `--${START_ON_FLAG}`, ...bounds], {
    cwd,
    env,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((done) => child.once("close", () => done()));
  return new Promise<RunningSession>((resolveStart, rejectStart) => {
    let buffered = "";
    const onData = (chunk: string) => {
      buffered += chunk;
      for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        const answer = parseLine(line);
        if (answer?.type !== "response" || answer.id !== "anon-notify-host-task") continue;
        child.stdout!.off("data", onData);
        // Pi's later output is not ours to read, but must be drained or Pi would block on a full pipe.
        child.stdout!.resume();
        if (answer.success === true) resolveStart({ child, exited });
        else rejectStart(new Error(`pi refused the task: ${String(answer.error ?? "no reason")}`));
      }
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.once("error", rejectStart);
    void exited.then(() => rejectStart(new Error(`pi exited (${child.exitCode ?? child.signalCode}) before it took the task`)));
    child.stdin!.write(`${JSON.stringify({ id: "anon-notify-host-task", type: "prompt", message: job.task })}\n`);
  });
}

function parseLine(line: string): { type?: unknown; id?: unknown; success?: unknown; error?: unknown } | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}
