/**
 * The console page's rendered replies (console/client/markdown.ts): markdown, but never HTML the
 * model wrote, never a remote image, never a script link.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { renderReply } from "../../console/client/markdown.ts";

test("a reply renders as markdown; HTML, images and script links come out as text", () => {
  const rows: [string, RegExp[], RegExp[]][] = [
    ["**done** and `npm test`", [/<strong>done<\/strong>/, /<code>npm test<\/code>/], []],
    ['<img src="https://evil.example/x.png" onerror="alert(1)">', [/^<p>&lt;img src=&quot;/, /onerror=&quot;alert\(1\)&quot;&gt;/], [/<img/]],
    ["<script>alert(1)</script>", [/&lt;script&gt;alert\(1\)&lt;\/script&gt;/], [/<script/]],
    // An image is a link to click, never fetched.
    ["![chart](https://evil.example/track.png)", [/!<a href="https:\/\/evil\.example\/track\.png"[^>]*>chart<\/a>/], [/<img/]],
    ["[docs](https://example.com/a)", [/<a href="https:\/\/example\.com\/a" target="_blank" rel="noopener noreferrer nofollow">docs<\/a>/], []],
    ["[click](javascript:alert(1))", [/\[click\]\(javascript:alert\(1\)\)/], [/<a /]],
  ];
  for (const [reply, present, absent] of rows) {
    const html = renderReply(reply);
    for (const pattern of present) assert.match(html, pattern, reply);
    for (const pattern of absent) assert.doesNotMatch(html, pattern, reply);
  }
});
