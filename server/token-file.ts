/** Secrets kept in files (agent, operator and console tokens): one rule for all of them. */
import { randomBytes } from "node:crypto";
import { lstatSync, readFileSync, writeFileSync } from "node:fs";

/** A token anyone could guess or brute-force is no token: generated ones have 64 characters. */
export const MIN_TOKEN_CHARS = 32;

/** Reads the token, creating it (0600) only when the file does not exist; an existing file is never
 * rewritten. Refused, with what to do: a symlink (the secret would live wherever it points), a file
 * others can read, and a token shorter than `MIN_TOKEN_CHARS`. */
export function ensureToken(path: string): string {
  try {
    writeFileSync(path, `${randomBytes(32).toString("hex")}\n`, { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const file = lstatSync(path);
  if (file.isSymbolicLink()) throw new Error(`Token 文件 ${path} 是符号链接；请换成普通文件（cp --remove-destination "$(readlink -f ${path})" ${path}）`);
  if (file.mode & 0o077) throw new Error(`Token 文件 ${path} 的权限是 ${octal(file.mode)}，其他用户可读；请执行 chmod 600 ${path}`);
  const token = readFileSync(path, "utf8").trim();
  if (!token) throw new Error(`Token 文件 ${path} 为空；请写入 Token 或删除该文件后重启以重新生成`);
  if (token.length < MIN_TOKEN_CHARS)
    throw new Error(
      `Token 文件 ${path} 中的 Token 太短（${token.length} 个字符，至少 ${MIN_TOKEN_CHARS} 个）；请换一个更长的 Token，或删除该文件后重启以重新生成`,
    );
  return token;
}

export function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8)}`;
}
