/**
 * `npm run sink:listen [-- --socket <path>] [--token-file <path>]`: stands in for the desktop app.
 * Listens on the sink socket with the shared token (created if absent, like the app would) and
 * prints every event as one JSON line; rejected requests go to stderr. Defaults come from the same
 * configuration the extension reads (sink.socket, sink.tokenFile, ANON_NOTIFY_SINK_*). Ctrl-C stops.
 */
import { parseArgs } from "node:util";
import { loadConfig } from "../extension/config/config.ts";
import { startSinkListener } from "../harness/sink-listener.ts";
import { ensureSinkToken } from "../extension/sink/token.ts";

const { values } = parseArgs({ options: { socket: { type: "string" }, "token-file": { type: "string" } } });
const loaded = loadConfig({ cwd: process.cwd(), env: process.env });
if (!loaded.ok && (!values.socket || !values["token-file"])) {
  console.error(loaded.errors.join("\n"));
  process.exit(2);
}
const socket = values.socket ?? (loaded.ok ? loaded.config.sink.socket : "");
const tokenFile = values["token-file"] ?? (loaded.ok ? loaded.config.sink.tokenFile : "");

const listener = await startSinkListener({
  socket,
  token: ensureSinkToken(tokenFile),
  onEvent: (envelope) => console.log(JSON.stringify(envelope)),
  onRejected: (status, reason) => console.error(`rejected ${status}: ${reason}`),
});
console.error(`listening on ${socket} (token file ${tokenFile}); Ctrl-C to stop`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void listener.close().then(() => process.exit(0)));
}
