/** The push routes' settings (ntfy, the Feishu bot), pure: what is wrong with a setting before the plugin starts. */
export interface PushConfig {
  ntfyUrl: string;
  ntfyTopic: string;
  ntfyToken: string;
  publicUrl: string;
  feishuWebhook: string;
  feishuSecret: string;
}

/** ntfy's own topic rule: 1–64 of letters, digits, `-` and `_`. */
const TOPIC = /^[-_A-Za-z0-9]{1,64}$/;

const isHttpUrl = (text: string) => {
  try {
    const url = new URL(text);
    return (url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password && !url.search && !url.hash;
  } catch {
    return false;
  }
};

/** The first setting that cannot work, with its value (never the token), or null. */
export function pushConfigProblem(config: PushConfig): { key: "url" | "topic" | "half" | "public-url" | "feishu"; value: string } | null {
  if (Boolean(config.ntfyUrl) !== Boolean(config.ntfyTopic)) return { key: "half", value: config.ntfyUrl || config.ntfyTopic };
  if (config.ntfyUrl && !isHttpUrl(config.ntfyUrl)) return { key: "url", value: config.ntfyUrl };
  if (config.ntfyTopic && !TOPIC.test(config.ntfyTopic)) return { key: "topic", value: config.ntfyTopic };
  if (config.publicUrl && !isHttpUrl(config.publicUrl)) return { key: "public-url", value: config.publicUrl };
  // The webhook's path is its credential: only the origin is worth showing.
  if (config.feishuWebhook && !isHttpUrl(config.feishuWebhook)) return { key: "feishu", value: config.feishuWebhook.slice(0, 40) };
  return null;
}
