/** Secrets out of free text that leaves the machine or is shown to a person. Only a literal value (a plain word) is masked, never anything the shell would
 * expand or run: a person approving a command must see all of its code (`X_TOKEN=$(curl … | sh)` stays as it is). */

const MASK = "***";

/** Characters of a plain word: nothing a shell expands, quotes or splits on. */
const PLAIN = "[A-Za-z0-9_.~+/=:%@,^-]";
/** Where a plain value must end for it to be the whole value. */
const WORD_END = `(?=$|[\\s"';&|)<>])`;
/** A name that says secret (`auth` but not `author`). */
const SECRET_NAME = "[A-Za-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth(?!or))[A-Za-z0-9_.-]*";

/** `NAME=value`, `--name=value`, `name: value` (a header, free text) and `--name value` (a flag with
 * its value as the next word), optionally quoted, where the name says secret and the value is plain. */
const NAMED_SECRET = new RegExp(`((?:^|[\\s"'{,;&(])(?:-{1,2}${SECRET_NAME}(?:=|\\s+)|${SECRET_NAME}["']?(?:=|:\\s*))["']?)(${PLAIN}+)${WORD_END}`, "gi");
/** `Authorization: Bearer x`, `Basic x`. */
const AUTH_SCHEME = new RegExp(`\\b(Bearer|Basic|Token)\\s+[A-Za-z0-9._~+/=-]{8,}${WORD_END}`, "g");
/** Credentials inside a URL: `https://user:pass@host`, the password plain. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[A-Za-z0-9_.~%+-]+):[A-Za-z0-9_.~%!*+,;=-]+@/gi;
/** Well-known key shapes: OpenAI/Anthropic `sk-…`, GitHub `ghp_…`, Slack `xox…`, AWS access key ids, JWTs. */
const KEY_SHAPES =
  /\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})\b/g;

/** Whether the variable a `NAME=` assigns is expanded in the text after it: hiding its value would hide what runs. */
function usedLater(name: string, rest: string): boolean {
  const variable = /([A-Za-z_][A-Za-z0-9_]*)["']?\s*[=:]/.exec(name)?.[1];
  return variable !== undefined && new RegExp(`\\$(?:\\{[#!]?)?${variable}(?![A-Za-z0-9_])`).test(rest);
}

export function redactSecrets(text: string): string {
  return (
    text
      .replace(URL_CREDENTIALS, `$1:${MASK}@`)
      .replace(AUTH_SCHEME, `$1 ${MASK}`)
      .replace(KEY_SHAPES, MASK)
      // An auth scheme word was handled above: its credential is already masked.
      .replace(NAMED_SECRET, (match, name: string, value: string, offset: number, whole: string) =>
        value === MASK || /^(Bearer|Basic|Token)$/i.test(value) || !tokenShaped(value) || usedLater(name, whole.slice(offset + match.length))
          ? match
          : `${name}${MASK}`,
      )
  );
}

/** A path (`/`, `~/x`, `./x`) is where a command acts, not a credential: it stays visible. */
const tokenShaped = (value: string) => !/^[/~.]/.test(value);
