/** The one "run again if kicked meanwhile" loop: a kick during a pass asks for one more pass after it,
 * never a second pass at once. A pass that throws ends the loop and is handed to `failed`. */
export function kickLoop(pass: () => Promise<void>, failed: (error: unknown) => void): () => void {
  let running = false;
  let again = false;
  return async () => {
    again = true;
    if (running) return;
    running = true;
    try {
      while (again) {
        again = false;
        await pass();
      }
    } catch (error) {
      failed(error);
    } finally {
      running = false;
    }
  };
}
