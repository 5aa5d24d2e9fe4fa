/** The programs that run other programs: their options, the interpreter options carrying code, settings and variables that run. */
import type { Word } from "./shell-rules.ts";

export const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
/** env takes any `NAME=value` (even a name bash would not), up to the command. */
export const ENV_ASSIGNMENT = /^([^=-][^=]*)=([\s\S]*)$/;

/** The short and long options that take a value, non-options before the command (`timeout DURATION`), `NAME=value` words. */
export interface Options {
  short?: string;
  long?: readonly string[];
  positionals?: number;
  assignments?: boolean;
}

/** Reads the options before the operands, the way getopt does: where the operands start (if any), and each option seen with its value. */
export function parseOptions(args: readonly Word[], spec: Options): { operands: number | undefined; seen: Map<string, Word | undefined> } {
  const seen = new Map<string, Word | undefined>();
  let positionals = spec.positionals ?? 0;
  for (let i = 0; i < args.length; i++) {
    const word = args[i]!;
    const value = word.value;
    if (value === undefined) {
      // `--name=$(…)`: an option with its value attached; anything else that expands is where the operands start.
      if (/^--?[A-Za-z][\w-]*=/.test(word.text)) continue;
      return { operands: i, seen };
    }
    if (value === "--") return { operands: i + 1 < args.length ? i + 1 : undefined, seen };
    if (value.startsWith("--")) {
      const [name, attached] = [value.split("=")[0]!, value.includes("=")];
      const takes = !attached && (spec.long ?? []).includes(name);
      seen.set(name, takes ? args[i + 1] : undefined);
      if (takes) i++;
      continue;
    }
    if (value.startsWith("-") && value.length > 1) {
      for (let j = 1; j < value.length; j++) {
        const letter = value[j]!;
        if (!(spec.short ?? "").includes(letter)) {
          seen.set(`-${letter}`, undefined);
          continue;
        }
        const rest = value.slice(j + 1);
        seen.set(`-${letter}`, rest ? { ...word, text: rest, value: rest } : args[i + 1]);
        if (!rest) i++;
        break;
      }
      continue;
    }
    if (spec.assignments && ENV_ASSIGNMENT.test(value)) continue;
    if (positionals-- <= 0) return { operands: i, seen };
  }
  return { operands: undefined, seen };
}

/** Commands that run their operands as a command, with their own options first (busybox and toybox their applets). */
export const WRAPPERS: Record<string, Options> = {
  ...Object.fromEntries("command builtin nohup coproc setsid chronic unbuffer busybox toybox".split(" ").map((name) => [name, {}])),
  env: { short: "uCS", long: ["--unset", "--chdir", "--split-string"], assignments: true },
  exec: { short: "a" },
  timeout: { short: "sk", long: ["--signal", "--kill-after"], positionals: 1 },
  nice: { short: "n", long: ["--adjustment"] },
  ionice: { short: "cnpPu", long: ["--class", "--classdata", "--pid", "--pgid", "--uid"] },
  stdbuf: { short: "ioe", long: ["--input", "--output", "--error"] },
  sudo: {
    short: "aCcDghpRrTtUu",
    long: "--auth-type --close-from --login-class --chdir --group --host --prompt --chroot --role --command-timeout --type --other-user --user".split(" "),
    assignments: true,
  },
  doas: { short: "uC" },
  time: { short: "fo", long: ["--format", "--output"] },
  xargs: { short: "IadELnPs", long: ["--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"] },
};

export const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"]);
export const SHELL_OPTIONS: Options = { short: "oO", long: ["--rcfile", "--init-file"] };
export const SU_OPTIONS: Options = { short: "cgGsw", long: ["--command", "--group", "--supp-group", "--shell", "--whitelist-environment"] };
export const WATCH_OPTIONS: Options = { short: "nq", long: ["--interval"] };
export const SCRIPT_OPTIONS: Options = {
  short: "cEIOBTm",
  long: "--command --echo --log-in --log-out --log-io --log-timing --logging-format --output-limit".split(" "),
};

/** `code`: options whose value is code; `module`: options after which it runs a module, not a script or standard input. */
export interface Interpreter {
  code: readonly string[];
  options: Options;
  module?: readonly string[];
}
export const INTERPRETERS: readonly [RegExp, Interpreter][] = [
  [/^(python|pypy)[0-9.]*$/, { code: ["-c"], options: { short: "cmWX" }, module: ["-m"] }],
  [
    /^(node|nodejs|bun)$/,
    {
      code: ["-e", "-p", "--eval", "--print"],
      options: { short: "eprC", long: "--eval --print --require --import --loader --input-type --env-file".split(" ") },
    },
  ],
  [/^perl[0-9.]*$/, { code: ["-e", "-E"], options: { short: "eEIMmx" } }],
  [/^ruby[0-9.]*$/, { code: ["-e"], options: { short: "eIrCE" } }],
  [/^php[0-9.]*$/, { code: ["-r", "-B", "-R", "-E"], options: { short: "rBREcdzf" } }],
  [/^(lua[0-9.]*|luajit)$/, { code: ["-e"], options: { short: "el" } }],
  [/^(Rscript|osascript)$/, { code: ["-e"], options: { short: "e" } }],
  [/^(tclsh[0-9.]*|wish)$/, { code: [], options: {} }],
];
export const AWKS = new Set(["awk", "gawk", "mawk", "nawk"]);
export const isStdinPath = (path: string) => path === "-" || path === "/dev/stdin" || path === "/dev/fd/0" || path === "/proc/self/fd/0";
/** A script path that is another open descriptor (`3< <(curl …)`), not a file anyone can read. */
export const isOtherDescriptor = (path: string) => !isStdinPath(path) && /^\/dev\/fd\/\d+$|^\/proc\/[^/]+\/fd\/\d+$/.test(path);
/** git's own options that take the next word (`-c` and `--config-env` are read for what they set). */
export const GIT_VALUE_OPTIONS = new Set(["-C", "--git-dir", "--work-tree", "--namespace"]);
/** git settings whose value git runs as a command. */
export const GIT_COMMAND_KEYS =
  /^(alias\..+|core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass|gitproxy)|sequence\.editor|diff\.external|credential\..*helper|gpg\.(.+\.)?program|.+\.(command|cmd|textconv|process|clean|smudge|driver|program|tool)|uploadpack\.packobjectshook|protocol\..+|url\..+|include\..+|includeif\..+)$/i;

/** Variables whose value bash or a common tool runs as code or a command line (`PS4='$(…)' bash -x`, `GIT_SSH_COMMAND`,
 * `LESSOPEN` …): set to anything but one plain word, what will run cannot be seen. */
export const CODE_VARIABLES =
  /^(BASH_ENV|ENV|PS[0-4]|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|PAGER|GIT_PAGER|MANPAGER|SYSTEMD_PAGER|EDITOR|VISUAL|GIT_EDITOR|GIT_SEQUENCE_EDITOR|GIT_SSH|GIT_SSH_COMMAND|GIT_EXTERNAL_DIFF|GIT_ASKPASS|SSH_ASKPASS|SUDO_ASKPASS|GIT_PROXY_COMMAND|GIT_CONFIG_PARAMETERS|GIT_CONFIG_(KEY|VALUE)_\d+|LESSOPEN|LESSCLOSE|NODE_OPTIONS|PERL5OPT|RUBYOPT|PYTHONSTARTUP|PYTHONINSPECT|BROWSER|LD_PRELOAD|LD_AUDIT)$/;
