/**
 * Test images: a real header of each type (so its dimensions decode), padded to an exact decoded
 * size. Only the header is read by the server, so the padding stands in for pixel data.
 */
import type { CommandImage, ImageMime } from "../../protocol/commands.ts";

/** The smallest header of each type from which the dimensions can be read. */
export function imageHeader(mime: ImageMime, width = 640, height = 480): Buffer {
  if (mime === "image/png") {
    const png = Buffer.alloc(33);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
    png.writeUInt32BE(13, 8);
    png.write("IHDR", 12, "latin1");
    png.writeUInt32BE(width, 16);
    png.writeUInt32BE(height, 20);
    png[24] = 8; // bit depth
    png[25] = 2; // truecolour
    return png;
  }
  if (mime === "image/gif") {
    const gif = Buffer.alloc(13);
    gif.write("GIF89a", 0, "latin1");
    gif.writeUInt16LE(width, 6);
    gif.writeUInt16LE(height, 8);
    return gif;
  }
  if (mime === "image/webp") {
    const webp = Buffer.alloc(30);
    webp.write("RIFF", 0, "latin1");
    webp.writeUInt32LE(22, 4);
    webp.write("WEBPVP8X", 8, "latin1");
    webp.writeUInt32LE(10, 16);
    webp.writeUIntLE(width - 1, 24, 3);
    webp.writeUIntLE(height - 1, 27, 3);
    return webp;
  }
  // SOI, a JFIF APP0 segment, then SOF0 with the height and width.
  return Buffer.from([
    0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00,
    0xff, 0xc0, 0x00, 0x11, 0x08, height >> 8, height & 0xff, width >> 8, width & 0xff, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01,
  ]);
}

export function imageOf(mime: ImageMime, bytes: number, fill = 0): CommandImage {
  const header = imageHeader(mime);
  const buffer = Buffer.alloc(Math.max(bytes, header.length), fill);
  header.copy(buffer);
  return { mime_type: mime, data: buffer.toString("base64") };
}
