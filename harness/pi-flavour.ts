/**
 * Which Pi the tests run against: ANON_NOTIFY_PI=next picks 1.6.0 (npm aliases `pi-coding-agent-next`,
 * `pi-ai-next`); anything else the pinned 0.87.1.
 *
 * The code names Pi by one name, `@earendil-works/pi-coding-agent` (its package since the move from
 * `@mariozechner/…`). The extension imports only its types from it (erased before Pi loads the
 * extension) and `@earendil-works/pi-tui` at run time, which Pi's extension loader answers with its own
 * copy under either name (0.87.1 and 1.6.0, `core/extensions/loader.js`); so no alias under the old
 * name is needed, and a clone installed with `--omit=dev` never had one.
 */
export const PI_FLAVOUR = process.env.ANON_NOTIFY_PI === "next" ? "next" : "pinned";
export const PI_PACKAGE = PI_FLAVOUR === "next" ? "pi-coding-agent-next" : "@earendil-works/pi-coding-agent";
export const PI_AI_PACKAGE = PI_FLAVOUR === "next" ? "pi-ai-next" : "@earendil-works/pi-ai";
