/**
 * Test images: real PNG, JPEG and GIF images (the server decodes them whole) padded to an exact
 * size with chunks, segments or extensions the decoders skip, and headers of each type with given
 * dimensions for the dimension checks.
 */
import { createRequire } from "node:module";
import { crc32 } from "node:zlib";
import type { CommandImage, ImageMime } from "../../protocol/queue.ts";

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
    0xff,
    0xd8,
    0xff,
    0xe0,
    0x00,
    0x10,
    0x4a,
    0x46,
    0x49,
    0x46,
    0x00,
    0x01,
    0x01,
    0x00,
    0x00,
    0x01,
    0x00,
    0x01,
    0x00,
    0x00,
    0xff,
    0xc0,
    0x00,
    0x11,
    0x08,
    height >> 8,
    height & 0xff,
    width >> 8,
    width & 0xff,
    0x03,
    0x01,
    0x22,
    0x00,
    0x02,
    0x11,
    0x01,
    0x03,
    0x11,
    0x01,
  ]);
}

const require = createRequire(import.meta.url);
const { PNG } = require("pngjs") as { PNG: { sync: { write(png: { width: number; height: number; data: Buffer }): Buffer } } };
const jpeg = require("jpeg-js") as typeof import("jpeg-js");
const { GifWriter } = require("omggif") as {
  GifWriter: new (
    buffer: Uint8Array,
    width: number,
    height: number,
    options: { palette: number[] },
  ) => { addFrame(x: number, y: number, w: number, h: number, indexed: number[]): void; end(): number };
};

/** A real 1×1 image of `mime` whose pixel is `fill`: it decodes as a whole. */
function realImage(mime: Exclude<ImageMime, "image/webp">, fill: number): Buffer {
  if (mime === "image/png") return PNG.sync.write({ width: 1, height: 1, data: Buffer.from([fill, fill, fill, 255]) });
  if (mime === "image/jpeg") return Buffer.from(jpeg.encode({ width: 1, height: 1, data: Buffer.from([fill, fill, fill, 255]) }, 90).data);
  const out = new Uint8Array(1024);
  const writer = new GifWriter(out, 1, 1, { palette: [fill * 0x10101, 0xffffff] });
  writer.addFrame(0, 0, 1, 1, [0]);
  return Buffer.from(out.subarray(0, writer.end()));
}

/** `pad` bytes (at least 12) as a private ancillary PNG chunk, which decoders skip. */
function pngPadding(pad: number, fill: number): Buffer {
  const chunk = Buffer.alloc(pad, fill);
  chunk.writeUInt32BE(pad - 12, 0);
  chunk.write("prVt", 4, "latin1");
  chunk.writeUInt32BE(crc32(chunk.subarray(4, pad - 4)), pad - 4);
  return chunk;
}

/** `pad` bytes (at least 4) as JPEG comment segments. */
function jpegPadding(pad: number, fill: number): Buffer {
  const segments: Buffer[] = [];
  for (let left = pad; left > 0; ) {
    // A segment is 4..65537 bytes; never leave fewer than 4 for the next one.
    let size = Math.min(left, 65_537);
    if (left - size > 0 && left - size < 4) size -= 4;
    const segment = Buffer.alloc(size, fill);
    segment[0] = 0xff;
    segment[1] = 0xfe;
    segment.writeUInt16BE(size - 2, 2);
    segments.push(segment);
    left -= size;
  }
  return Buffer.concat(segments);
}

/** `pad` bytes (at least 4) as one GIF comment extension: its data in sub-blocks of at most 255 bytes. */
function gifPadding(pad: number, fill: number): Buffer {
  const parts = [Buffer.from([0x21, 0xfe])];
  let left = pad - 3; // introducer, label, terminator
  while (left > 0) {
    let data = Math.min(255, left - 1);
    if (left - 1 - data === 1) data -= 1; // a lone byte left over could not form a sub-block
    parts.push(Buffer.from([data]), Buffer.alloc(data, fill));
    left -= data + 1;
  }
  parts.push(Buffer.from([0x00]));
  return Buffer.concat(parts);
}

/**
 * A real image of `mime` (1×1, so it decodes as a whole; WebP a header only, which is all the server
 * reads of one) padded to exactly `bytes` where the format allows, with padding the decoders skip;
 * smaller requests get the smallest real image. `fill` makes images of the same size differ.
 */
export function imageOf(mime: ImageMime, bytes: number, fill = 0): CommandImage {
  if (mime === "image/webp") {
    const header = imageHeader(mime);
    const buffer = Buffer.alloc(Math.max(bytes, header.length), fill);
    header.copy(buffer);
    return { mime_type: mime, data: buffer.toString("base64") };
  }
  const image = realImage(mime, fill);
  const pad = bytes - image.length;
  let padded = image;
  if (mime === "image/png" && pad >= 12)
    padded = Buffer.concat([image.subarray(0, image.length - 12), pngPadding(pad, fill), image.subarray(image.length - 12)]);
  if (mime === "image/jpeg" && pad >= 4) padded = Buffer.concat([image.subarray(0, 2), jpegPadding(pad, fill), image.subarray(2)]);
  if (mime === "image/gif" && pad >= 4) padded = Buffer.concat([image.subarray(0, image.length - 1), gifPadding(pad, fill), image.subarray(image.length - 1)]);
  return { mime_type: mime, data: padded.toString("base64") };
}
