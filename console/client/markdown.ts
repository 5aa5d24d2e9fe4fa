/** A run's final reply rendered as markdown, safely: the model wrote it, so no HTML, no image is fetched,
 * and a link reads as the host it opens (`xn--…` for international names), its words beside it as text. */
import MarkdownIt from "markdown-it";

const md = new MarkdownIt({ html: false, linkify: true, breaks: true }).disable(["image"]);
type Token = ReturnType<InstanceType<typeof MarkdownIt>["parse"]>[number];
type TokenClass = new (type: string, tag: string, nesting: -1 | 0 | 1) => Token;

/** Where a link really goes, as its visible text: the host (ASCII), or the address of a mail link. */
export function linkHost(href: string): string {
  try {
    const url = new URL(href);
    return url.protocol === "mailto:" ? url.pathname : url.host || url.protocol;
  } catch {
    return href;
  }
}

/** Rewrites every link in `children` to `label <a>host</a>` (an address written out is only the link, reading as that address). */
function honestLinks(children: Token[], TokenOf: TokenClass): Token[] {
  const text = (content: string) => Object.assign(new TokenOf("text", "", 0), { content });
  const out: Token[] = [];
  for (let i = 0; i < children.length; i++) {
    const open = children[i]!;
    if (open.type !== "link_open") {
      out.push(open);
      continue;
    }
    const close = children.findIndex((token, at) => at > i && token.type === "link_close");
    const label = children.slice(i + 1, close);
    const href = String(open.attrGet("href") ?? "");
    const auto = open.markup === "autolink" || open.markup === "linkify";
    // An address written out reads as the whole address it opens (punycode as the parser spells it), any other link as its host.
    const host = text(auto && !href.startsWith("mailto:") ? href : linkHost(href));
    if (!auto) out.push(...label, text(" "));
    open.attrSet("target", "_blank");
    open.attrSet("rel", "noopener noreferrer nofollow");
    open.attrSet("title", href);
    out.push(open, host, children[close]!);
    i = close;
  }
  return out;
}

md.core.ruler.push("honest_links", (state) => {
  for (const token of state.tokens) if (token.type === "inline" && token.children) token.children = honestLinks(token.children, state.Token);
});

export const renderReply = (text: string): string => md.render(text);
