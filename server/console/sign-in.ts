/** The console token, the page's sign-in without plugin-auth: presented once per WebSocket connection;
 * changing the token signs every browser out. */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdirSync } from "node:fs";
import type { Socket } from "node:net";
import { dirname } from "node:path";
import { z } from "zod";
import { trustConnection } from "../http/trust.ts";
import { MIN_TOKEN_CHARS, ensureToken } from "../token-file.ts";

export const ConsoleSignInInput = z.strictObject({ token: z.string().max(512) });

/** One connection's sign-in on the audit trail: `id` tells two browsers (or visits) apart, `generation` (the start
 * of its SHA-256, never the token) which token it used. */
export type SignIn = ReturnType<typeof signedInOn>;

const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();

/** Compares in constant time (over digests, so the lengths never differ). Pure. */
export const tokenMatches = (presented: string, token: string): boolean => token.length > 0 && timingSafeEqual(digest(presented), digest(token));

/** A connection that signed in: its sign-in, and its socket kept when strangers fill `npm start` (http/trust.ts). */
export function signedInOn(socket: Socket | undefined, token: string, nowMs: number) {
  trustConnection(socket);
  return { id: `si-${randomBytes(4).toString("hex")}`, at: new Date(nowMs).toISOString(), generation: digest(token).toString("hex").slice(0, 8) };
}

export const signInUrl = (pageUrl: string, token: string): string => `${pageUrl}?token=${encodeURIComponent(token)}`;

/** The plugin's own token when its config names none: created once (0600), kept across restarts. */
export function consoleTokenFromFile(path: string): string {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  return ensureToken(path);
}

/** Why a console token from the config cannot be used, or null. Pure. */
export function consoleTokenProblem(token: string, otherTokens: readonly string[]): string | null {
  if (token.length < MIN_TOKEN_CHARS)
    return `consoleToken 太短（${token.length} 个字符，至少 ${MIN_TOKEN_CHARS} 个）/ consoleToken is too short (at least ${MIN_TOKEN_CHARS} characters)`;
  if (otherTokens.includes(token))
    return "consoleToken 与 Pi 端或运维接口的 Token 相同，请设为不同的值 / consoleToken equals the agents' or the operator token; use a different one";
  return null;
}
