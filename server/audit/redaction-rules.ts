/** What the audit trail keeps of any input: secret-named keys dropped, images reduced to digests, long
 * strings cut; every row's data passes through `auditData`. */
import { createHash } from "node:crypto";

/** Longer strings are cut: the trail records what was said, not unbounded blobs. */
const MAX_STRING_CHARS = 16_000;
/** `token`, `lease_token`, `operatorToken`, `authorization`…; not `used_tokens` or `max_tokens`. */
const SECRET_KEY = /(^|[_-])(token|secret|password|authorization)$|[a-z](Token|Secret|Password)$/i;

/** What the trail keeps of images: how many, how large, and a digest of each; never the bytes. */
export function imageFacts(images: readonly unknown[]) {
  const digests: string[] = [];
  let bytes = 0;
  for (const image of images) {
    const data = typeof image === "object" && image !== null && typeof (image as { data?: unknown }).data === "string" ? (image as { data: string }).data : "";
    const decoded = Buffer.from(data, "base64");
    bytes += decoded.length;
    digests.push(createHash("sha256").update(decoded).digest("hex"));
  }
  return { count: images.length, bytes, sha256: digests };
}

/** A JSON-safe copy fit for the trail: secret-named keys dropped, images digested, long strings cut. */
export function auditData(value: unknown): unknown {
  if (typeof value === "string") return value.length > MAX_STRING_CHARS ? `${value.slice(0, MAX_STRING_CHARS)}…` : value;
  if (value === null || typeof value !== "object") return typeof value === "bigint" ? String(value) : value;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(auditData);
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined || SECRET_KEY.test(key)) continue;
    copy[key] = key === "images" && Array.isArray(item) ? imageFacts(item) : auditData(item);
  }
  return copy;
}
