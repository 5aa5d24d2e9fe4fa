/**
 * Tearing down what a test started: every step runs even when an earlier one throws, so one failed
 * stop never leaves a server, a Pi runtime or a temp folder behind to keep the test file alive.
 */

/** Runs each step in order; afterwards throws the first error (all of them, when several failed). */
export async function closeAll(...steps: (() => unknown)[]): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, "several clean-up steps failed");
}
