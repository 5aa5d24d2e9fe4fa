/** The sink's token file (hex, 0600) is created only when absent and never overwritten: the app and the
 * extension share it, and overwriting would lock the other side out. */
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, fchmodSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { isMissingFile } from "../../common/errors.ts";

export const SINK_TOKEN_BYTES = 32;

/** Reads the token; `undefined` when the file does not exist. Throws on an empty or unreadable file. */
export function readSinkToken(tokenFile: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(tokenFile, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return undefined;
    throw error;
  }
  const token = text.trim();
  if (!token) throw new Error(`token file ${tokenFile} is empty`);
  return token;
}

/** Creates the file (and its folder) first when it is absent. */
export function ensureSinkToken(tokenFile: string): string {
  const existing = readSinkToken(tokenFile);
  if (existing !== undefined) return existing;
  const folder = dirname(tokenFile);
  const created = mkdirSync(folder, { recursive: true, mode: 0o700 });
  // mkdir's mode passes through the umask; only the folders created here are set, never an existing one.
  if (created !== undefined) chmodSync(folder, 0o700);
  // Write a private temp file, then hard-link it into place: the link appears complete or not at
  // all, and fails when the app created the file in the meantime (its token then wins).
  const temp = `${tokenFile}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const fd = openSync(temp, "wx", 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, `${randomBytes(SINK_TOKEN_BYTES).toString("hex")}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temp, tokenFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    unlinkSync(temp);
  }
  const token = readSinkToken(tokenFile);
  if (token === undefined) throw new Error(`token file ${tokenFile} vanished while it was being created`);
  return token;
}
