/** Test images: the real magic bytes of each type, padded to an exact decoded size. */
import type { CommandImage, ImageMime } from "../../protocol/commands.ts";

const MAGIC: Record<ImageMime, Buffer> = {
  "image/png": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  "image/jpeg": Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  "image/gif": Buffer.from("GIF89a", "latin1"),
  "image/webp": Buffer.concat([Buffer.from("RIFF", "latin1"), Buffer.alloc(4), Buffer.from("WEBPVP8 ", "latin1")]),
};

export function imageOf(mime: ImageMime, bytes: number, fill = 0): CommandImage {
  const buffer = Buffer.alloc(Math.max(bytes, MAGIC[mime].length), fill);
  MAGIC[mime].copy(buffer);
  return { mime_type: mime, data: buffer.toString("base64") };
}
