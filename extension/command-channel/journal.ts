/** The command journal: an id is flushed to disk before the server hears the ACK, so a retried lease, a
 * reload or a restart ACKs again instead of steering twice; a control command's line keeps its outcome. */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { appendDurably, replaceDurably } from "../../common/durable-file.ts";
import { isMissingFile } from "../../common/errors.ts";
import { CommandOutcome, StoppedRun } from "../../protocol/queue.ts";
import { Id, Timestamp } from "../../protocol/wire.ts";
import type { Applied } from "./control-rules.ts";

// Not strict: a line written by a newer version with more keys is still read.
const JournalRecord = z.object({
  version: z.literal(1),
  command_id: Id,
  session_id: Id,
  event_id: Id,
  delivered_at: Timestamp,
  // Control commands only: what applying it did, and the run a stop stopped (sent again with a repeated ACK).
  outcome: CommandOutcome.optional(),
  run: StoppedRun.optional(),
});
export type JournalRecord = z.infer<typeof JournalRecord>;

// An id matters only while its lease can come back (minutes, a restart): past the cap the file is cut back to the newest records, at open only.
export const JOURNAL_KEEP_RECORDS = 2_000;
export const JOURNAL_COMPACT_AT_RECORDS = 4_000;

export interface CommandJournal {
  has(commandId: string): boolean;
  applied(commandId: string): Partial<Applied>;
  /** Appends and fsyncs one record; resolves only once it is on disk. */
  record(entry: Omit<JournalRecord, "version">): Promise<void>;
}

/** Reads what is there (missing: empty) and returns the appender; invalid lines are kept in the file and counted (`skippedLines`), never guessed at. */
export async function openCommandJournal(file: string): Promise<{ journal: CommandJournal; skippedLines: number }> {
  let lines: string[] = [];
  try {
    lines = (await readFile(file, "utf8")).split("\n").filter((line) => line.trim() !== "");
  } catch (error) {
    if (!isMissingFile(error)) throw error;
  }
  const records = lines.flatMap((line) => {
    try {
      const result = JournalRecord.safeParse(JSON.parse(line));
      return result.success ? [result.data] : [];
    } catch {
      return [];
    }
  });
  const skippedLines = lines.length - records.length;
  if (records.length > JOURNAL_COMPACT_AT_RECORDS && skippedLines === 0) {
    const kept = records.slice(-JOURNAL_KEEP_RECORDS).map((r) => `${JSON.stringify(r)}\n`);
    await replaceDurably(file, kept.join(""));
  }
  const known = new Map<string, Partial<Applied>>(records.map((r) => [r.command_id, { outcome: r.outcome, run: r.run }]));
  let tail: Promise<void> = Promise.resolve();

  return {
    skippedLines,
    journal: {
      has: (commandId) => known.has(commandId),
      applied: (commandId) => known.get(commandId) ?? { outcome: undefined, run: undefined },
      record(entry) {
        const parsed = JournalRecord.safeParse({ version: 1, ...entry });
        if (!parsed.success) return Promise.reject(new Error(`invalid journal record: ${parsed.error.message}`));
        // Appends are chained so two records never interleave and each resolves after its own fsync.
        const written = tail.then(() => appendDurably(file, `${JSON.stringify(parsed.data)}\n`));
        tail = written.catch(() => undefined);
        return written.then(() => {
          known.set(entry.command_id, { outcome: entry.outcome, run: entry.run });
        });
      },
    },
  };
}
