/**
 * Secrets out of free text that leaves the machine or is shown to a person (an approval's preview
 * of a command line): the extension redacts before it sends, the server again before it stores or
 * sends. Pure. Redaction keeps the shape (`TOKEN=…`) so a person still sees what the call does.
 */

const MASK = "***";

/** `name=value`, `name: value` and `--name value` where the name says secret. */
const NAMED_SECRET = /((?:^|[\s"'{,;&(])-{0,2}[A-Za-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth)[A-Za-z0-9_.-]*["']?\s*(?:=|:|\s)\s*["']?)([^\s"',;&)]+)/gi;
/** `Authorization: Bearer x`, `Basic x`. */
const AUTH_SCHEME = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}/g;
/** Credentials inside a URL: `https://user:pass@host`. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/:@]+):[^\s/@]+@/gi;
/** Well-known key shapes: OpenAI/Anthropic `sk-…`, GitHub `ghp_…`, Slack `xox…`, AWS access key ids, JWTs. */
const KEY_SHAPES = /\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})\b/g;

export function redactSecrets(text: string): string {
  return text
    .replace(URL_CREDENTIALS, `$1:${MASK}@`)
    .replace(AUTH_SCHEME, `$1 ${MASK}`)
    .replace(KEY_SHAPES, MASK)
    // An auth scheme word was handled above: its credential is already masked.
    .replace(NAMED_SECRET, (match, name: string, value: string) => (value === MASK || /^(Bearer|Basic|Token)$/i.test(value) ? match : `${name}${MASK}`));
}
