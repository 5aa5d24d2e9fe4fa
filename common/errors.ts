/** Small leaf helpers for reading errors, shared by the extension, the server, scripts and tests. */

/** The message of an Error, or the value as text: what a log line or a user-facing reason shows. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function isMissingFile(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}
