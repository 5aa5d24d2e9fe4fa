/** Small leaf helpers for reading errors, shared by the extension, the server, scripts and tests. */

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function isMissingFile(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
}
