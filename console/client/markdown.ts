/**
 * A run's final reply, as the notice carried it, rendered as markdown for the page, safely: the
 * model wrote it, so no HTML passes (`html: false` writes tags as text), no image is fetched (the
 * image rule is off: a remote image would tell a stranger the page was opened), and links open
 * apart from the page. markdown-it refuses `javascript:` and similar links itself.
 */
import MarkdownIt from "markdown-it";

const md = new MarkdownIt({ html: false, linkify: true, breaks: true }).disable(["image"]);
const renderLink = md.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
md.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index]!.attrSet("target", "_blank");
  tokens[index]!.attrSet("rel", "noopener noreferrer nofollow");
  return renderLink(tokens, index, options, env, self);
};

export function renderReply(text: string): string {
  return md.render(text);
}
