/**
 * A loopback stand-in for a Feishu (Lark) custom bot's webhook: `POST /open-apis/bot/v2/hook/<token>`
 * with `{"timestamp","sign","msg_type","content"}`, checking the signature as Feishu documents it
 * (base64 HMAC-SHA256 keyed with `timestamp + "\n" + secret` over nothing, timestamp within an hour)
 * and answering as Feishu does (`{"code":0,"msg":"success"}`, `19021` for a bad signature, `11232`
 * when rate-limited on demand). It records what it accepted.
 */
import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeFeishu {
  url: string;
  secret: string;
  received: Array<{ msg_type: string; content: { text: string }; timestamp: string; sign: string }>;
  answers: number[];
  /** The next `count` messages are answered with Feishu's rate-limit code. */
  rateLimit(count: number): void;
  stop(): Promise<void>;
}

export async function startFakeFeishu(secret = "feishu-secret-0123"): Promise<FakeFeishu> {
  const received: FakeFeishu["received"] = [];
  const answers: number[] = [];
  let limited = 0;
  const token = "hook-token-abc";
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const answer = (code: number, msg: string) => {
        answers.push(code);
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ code, data: {}, msg }));
      };
      if (request.method !== "POST" || request.url !== `/open-apis/bot/v2/hook/${token}`)
        return answer(19001, "param invalid: incoming webhook access token invalid");
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const timestamp = Number(body.timestamp);
      const expected = createHmac("sha256", `${body.timestamp}\n${secret}`).update("").digest("base64");
      if (body.sign !== expected || Math.abs(Date.now() / 1000 - timestamp) > 3600)
        return answer(19021, "sign match fail or timestamp is not within one hour from current time");
      if (limited > 0) {
        limited--;
        return answer(11232, "frequency limited psm[lark.oapi.app_platform_runtime]appID[1]");
      }
      if (chunks.reduce((n, c) => n + c.length, 0) > 20 * 1024) return answer(9499, "request body too large");
      received.push(body);
      answer(0, "success");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/open-apis/bot/v2/hook/${token}`,
    secret,
    received,
    answers,
    rateLimit: (count) => void (limited += count),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
