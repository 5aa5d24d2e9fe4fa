/** The two languages user-facing text comes in, and which one a process's locale asks for. */
export const LANGUAGES = ["zh-CN", "en-US"] as const;
export type Language = (typeof LANGUAGES)[number];

/** The language a locale asks for (LC_ALL > LC_MESSAGES > LANG, as POSIX orders them): Chinese for `zh*`, and for an unset, `C` or `POSIX` locale (no
 * preference stated; the project's first audience reads Chinese); English for any other. */
export function localeLanguage(env: NodeJS.ProcessEnv): Language {
  const locale = [env.LC_ALL, env.LC_MESSAGES, env.LANG].find((value) => value !== undefined && value.trim() !== "")?.trim() ?? "";
  const name = locale.split(/[.@]/)[0]?.toLowerCase() ?? "";
  if (name === "" || name === "c" || name === "posix" || name.startsWith("zh")) return "zh-CN";
  return "en-US";
}
