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
    ["![chart](https://evil.example/track.png)", [/!chart <a href="https:\/\/evil\.example\/track\.png"[^>]*>evil\.example<\/a>/], [/<img/]],
    [
      "[docs](https://example.com/a)",
      [/docs <a href="https:\/\/example\.com\/a" target="_blank" rel="noopener noreferrer nofollow"[^>]*>example\.com<\/a>/],
      [],
    ],
    ["[click](javascript:alert(1))", [/\[click\]\(javascript:alert\(1\)\)/], [/<a /]],
  ];
  for (const [reply, present, absent] of rows) {
    const html = renderReply(reply);
    for (const pattern of present) assert.match(html, pattern, reply);
    for (const pattern of absent) assert.doesNotMatch(html, pattern, reply);
  }
});

test("a link's visible text is where it really goes: the host, punycode as xn--, the link's own words beside it as text", () => {
  const rows: [string, string][] = [
    [
      "[https://bank.example/login](http://evil.example/phish)",
      '<p>https://bank.example/login <a href="http://evil.example/phish" target="_blank" rel="noopener noreferrer nofollow" title="http://evil.example/phish">evil.example</a></p>',
    ],
    [
      "<https://xn--80ak6aa92e.com>",
      '<p><a href="https://xn--80ak6aa92e.com" target="_blank" rel="noopener noreferrer nofollow" title="https://xn--80ak6aa92e.com">https://xn--80ak6aa92e.com</a></p>',
    ],
    [
      "see https://\u0430\u0440\u0440\u04cf\u0435.com/x",
      '<p>see <a href="https://xn--80ak6aa92e.com/x" target="_blank" rel="noopener noreferrer nofollow" title="https://xn--80ak6aa92e.com/x">https://xn--80ak6aa92e.com/x</a></p>',
    ],
  ];
  for (const [reply, html] of rows) assert.equal(renderReply(reply).trim(), html, reply);
  // Whatever the label (an address, a port, an international name), the text inside every <a> names the host of its href.
  const links = [
    ...renderReply("[https://bank.example](https://evil.example:8443/p) and <http://b\u00fccher.example>").matchAll(/<a href="([^"]+)"[^>]*>([^<]*)<\/a>/g),
  ];
  assert.deepEqual(
    links.map((m) => [new URL(m[1]!).host, m[2]]),
    [
      ["evil.example:8443", "evil.example:8443"],
      ["xn--bcher-kva.example", "http://xn--bcher-kva.example"],
    ],
  );
});
