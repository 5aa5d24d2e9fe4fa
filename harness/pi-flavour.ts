/**
 * Which Pi the tests run against: ANON_NOTIFY_PI=next picks 1.6.0 (npm aliases `pi-coding-agent-next`,
 * `pi-ai-next`); anything else the pinned 0.87.1.
 */
export const PI_FLAVOUR = process.env.ANON_NOTIFY_PI === "next" ? "next" : "pinned";
export const PI_PACKAGE = PI_FLAVOUR === "next" ? "pi-coding-agent-next" : "@earendil-works/pi-coding-agent";
export const PI_AI_PACKAGE = PI_FLAVOUR === "next" ? "pi-ai-next" : "@earendil-works/pi-ai";
