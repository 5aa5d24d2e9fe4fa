/** Decodes a whole image (PNG, JPEG, GIF) before an instruction carrying it is accepted, so a valid header
 * over garbage is refused here, not by the model provider; WebP is checked by its header only. */
import { createRequire } from "node:module";
import type { ImageMime } from "../../protocol/queue.ts";

const require = createRequire(import.meta.url);
// Loaded through require with the few calls used typed here: pngjs and omggif ship no types.
const { PNG } = require("pngjs") as { PNG: { sync: { read(data: Buffer, options: { checkCRC: boolean }): { width: number; height: number } } } };
const jpeg = require("jpeg-js") as typeof import("jpeg-js");
const { GifReader } = require("omggif") as {
  GifReader: new (
    data: Uint8Array,
  ) => {
    width: number;
    height: number;
    numFrames(): number;
    frameInfo(index: number): { data_offset: number; data_length: number };
    decodeAndBlitFrameRGBA(index: number, pixels: Uint8Array): void;
  };
};

const GIF_TRAILER = 0x3b;

/** Null when the whole image decodes, else why not. `maxPixels` bounds what the JPEG decoder may allocate. */
export function wholeImageProblem(mime: ImageMime, bytes: Buffer, maxPixels: number): string | null {
  try {
    if (mime === "image/png") PNG.sync.read(bytes, { checkCRC: true });
    else if (mime === "image/jpeg") jpeg.decode(bytes, { useTArray: true, maxResolutionInMP: maxPixels / 1_000_000, tolerantDecoding: false });
    else if (mime === "image/gif") decodeGif(bytes);
    return null;
  } catch (error) {
    return `${mime} does not decode as a whole (${error instanceof Error ? error.message.slice(0, 120) : "unreadable"})`;
  }
}

function decodeGif(bytes: Buffer): void {
  const reader = new GifReader(bytes);
  // omggif stops quietly at the end of the data: a cut file has no trailer, or frames past the end.
  if (bytes[bytes.length - 1] !== GIF_TRAILER) throw new Error("no GIF trailer");
  const pixels = new Uint8Array(reader.width * reader.height * 4);
  for (let index = 0; index < reader.numFrames(); index++) {
    const frame = reader.frameInfo(index);
    if (frame.data_offset + frame.data_length > bytes.length) throw new Error(`frame ${index} is cut off`);
    reader.decodeAndBlitFrameRGBA(index, pixels);
  }
}
