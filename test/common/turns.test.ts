import assert from "node:assert/strict";
import test from "node:test";
import { Turns } from "../../common/turns.ts";

/** A task that logs its start and end, finishing when the test says so (or failing). */
function scripted(log: string[]) {
  const finish = new Map<string, (fail: boolean) => void>();
  const task = (name: string) => () =>
    new Promise<string>((resolve, reject) => {
      log.push(`${name} start`);
      finish.set(name, (fail) => {
        log.push(`${name} end`);
        if (fail) reject(new Error(name));
        else resolve(name);
      });
    });
  return { task, end: (name: string, fail = false) => finish.get(name)!(fail) };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test("tasks of one key run one at a time in arrival order, across failures; other keys run beside them", async () => {
  // Each row: the tasks as [name, key], the order in which the test ends them (a `!` fails it), the log expected.
  const table: { tasks: [string, string][]; ends: string[]; log: string[] }[] = [
    {
      tasks: [
        ["a1", "a"],
        ["a2", "a"],
        ["a3", "a"],
      ],
      ends: ["a1", "a2", "a3"],
      log: ["a1 start", "a1 end", "a2 start", "a2 end", "a3 start", "a3 end"],
    },
    {
      tasks: [
        ["a1", "a"],
        ["b1", "b"],
        ["a2", "a"],
      ],
      ends: ["b1", "a1", "a2"],
      log: ["a1 start", "b1 start", "b1 end", "a1 end", "a2 start", "a2 end"],
    },
    {
      tasks: [
        ["a1", "a"],
        ["a2", "a"],
      ],
      ends: ["!a1", "a2"],
      log: ["a1 start", "a1 end", "a2 start", "a2 end"],
    },
  ];
  for (const { tasks, ends, log: expected } of table) {
    const log: string[] = [];
    const { task, end } = scripted(log);
    const turns = new Turns();
    const results = tasks.map(([name, key]) =>
      turns.run(key, task(name)).then(
        (value) => value,
        (error: Error) => `failed ${error.message}`,
      ),
    );
    for (const name of ends) {
      await tick();
      end(name.replace("!", ""), name.startsWith("!"));
    }
    const settled = await Promise.all(results);
    assert.deepEqual(log, expected, JSON.stringify(tasks));
    assert.deepEqual(
      settled,
      tasks.map(([name]) => (ends.includes(`!${name}`) ? `failed ${name}` : name)),
    );
  }
});
