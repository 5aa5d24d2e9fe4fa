/** The README's doctor samples are real output: in each language, a fresh `npm start` server, Pi's own CLI paired
 * with it by the printed line, switched on, `/anon-notify-doctor test`; the README's block must equal what the
 * doctor printed, with temp paths, ports and ids normalized. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runStandalone } from "../../server/standalone/start.ts";
import { freePort } from "../../harness/koishi.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { REPO, describeRun, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";

/** What differs from one run to the next: temp folders, the port, session and event ids, when presence was first accepted. */
function normalized(text: string): string {
  return text
    .replace(/\/tmp\/anon-notify-cli-[A-Za-z0-9]+/g, "/tmp/anon-notify-cli-XXXXXX")
    .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:5140")
    .replace(/ext:[0-9a-f-]+:doctor-[0-9a-f-]+/g, "ext:<session>:doctor-<id>")
    .replace(/^( {2}(presence: running|在线心跳：运行中)).*$/gm, "$1…");
}

/** The README's sample for a language: the text block right after the sentence that introduces it. */
function readmeSample(language: "zh-CN" | "en-US"): string {
  const readme = readFileSync(join(REPO, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf(language === "en-US" ? "### Is it working? `/anon-notify-doctor`" : "### 诊断：`/anon-notify-doctor`"));
  const blocks = [...section.matchAll(/```text\n([\s\S]*?)```/g)].map((match) => match[1]!);
  const sample = blocks.find((block) => block.startsWith(messagesFor(language).doctor.title));
  assert.ok(sample, `the README's ${language} doctor sample`);
  return sample.trimEnd();
}

for (const language of ["zh-CN", "en-US"] as const) {
  test(`(${language}) the README's doctor sample is what the doctor prints after pairing with npm start`, { timeout: 120_000 }, async (t) => {
    const serverDir = mkdtempSync(join(tmpdir(), "anon-notify-readme-doctor-"));
    let printed = "";
    const server = await runStandalone({ host: "127.0.0.1", port: await freePort(), dataDir: serverDir, configPath: join(serverDir, "server.json") }, REPO, {
      announce: (text) => (printed += `${text}\n`),
      language,
    });
    const { home } = await stubbedPiHome(t, async () => {
      await server.stop();
      rmSync(serverDir, { recursive: true, force: true });
    });
    const setup = /^ {2}(\/anon-notify-setup \S+)$/m.exec(printed)?.[1];
    assert.ok(setup, printed);
    const LANG = language === "en-US" ? "en_US.UTF-8" : "C.UTF-8";
    const run = await runPi(home, ["-e", REPO, "-p", "--session", join(home.root, "session.jsonl"), setup, "/anon-notify", "/anon-notify-doctor test"], {
      env: { LANG },
    });
    assert.equal(run.code, 0, describeRun(run));
    const title = messagesFor(language).doctor.title;
    const report = run.stderr.slice(run.stderr.lastIndexOf(`${title}\n`)).trimEnd();
    if (process.env.PRINT_DOCTOR) console.log(normalized(report));
    assert.equal(normalized(readmeSample(language)), normalized(report), "the README's sample (run with PRINT_DOCTOR=1 to see the output)");
  });
}
