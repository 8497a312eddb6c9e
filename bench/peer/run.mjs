// The peer of agentd's long-chat replay: LangChain.js createAgent, either
// with summarizationMiddleware configured as its documentation recommends
// when the window is known (a token trigger at 85% of the window, the
// documented keep of the last 20 messages), or with plain trimMessages to
// 85% of the window before every model call. It replays the same turns
// against the same OpenAI-style fake; the fake counts the tokens, so this
// script only reports timings and refusals.
//
// node run.mjs --base-url URL --window N --replay FILE --mode summarization|trim --turns N --out FILE
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createAgent, createMiddleware, summarizationMiddleware, tool } from "langchain";
import { HumanMessage, trimMessages } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const { values: args } = parseArgs({
  options: {
    "base-url": { type: "string" },
    window: { type: "string" },
    replay: { type: "string" },
    mode: { type: "string", default: "summarization" },
    turns: { type: "string", default: "0" },
    out: { type: "string" },
  },
});
const window = Number(args.window);
const replay = JSON.parse(readFileSync(args.replay, "utf8"));
const turns = Math.min(Number(args.turns) || replay.turns.length, replay.turns.length);
const trigger = Math.floor(window * 0.85);

// Time spent waiting for the fake: from the request to the last byte of the
// answer, so the rest of a turn's time is the peer's own overhead.
let modelMs = 0;
const timedFetch = async (url, init) => {
  const t0 = performance.now();
  const res = await fetch(url, init);
  const body = await res.arrayBuffer();
  modelMs += performance.now() - t0;
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
};

const model = new ChatOpenAI({
  model: "m",
  apiKey: "bench",
  maxRetries: 0,
  configuration: { baseURL: args["base-url"], fetch: timedFetch },
});

const results = new Map(replay.turns.filter((t) => t.report).map((t) => [t.report, t.result]));
const lookup = tool(async ({ report }) => results.get(report) ?? `no report ${report}`, {
  name: "bench_lookup",
  description: "Look up a report by id and return its full text.",
  schema: z.object({ report: z.string().describe("the report id, like r-12") }),
});

// What was set, written down in the output as well.
let settings;
let middleware;
if (args.mode === "summarization") {
  settings = { trigger: { tokens: trigger }, keep: { messages: 20 }, model: "the chat's own model (same fake)" };
  middleware = [summarizationMiddleware({ model, trigger: { tokens: trigger }, keep: { messages: 20 } })];
} else if (args.mode === "trim") {
  settings = { maxTokens: trigger, strategy: "last", tokenCounter: "characters / 4", startOn: "human" };
  const approx = (msgs) => {
    let chars = 0;
    for (const m of msgs) {
      chars += typeof m.content === "string" ? m.content.length : JSON.stringify(m.content).length;
      if (m.tool_calls?.length) chars += JSON.stringify(m.tool_calls).length;
    }
    return Math.ceil(chars / 4);
  };
  middleware = [
    createMiddleware({
      name: "TrimMessages",
      wrapModelCall: async (request, handler) => {
        const messages = await trimMessages(request.messages, {
          maxTokens: trigger,
          strategy: "last",
          tokenCounter: approx,
          startOn: "human",
        });
        return handler({ ...request, messages });
      },
    }),
  ];
} else {
  throw new Error(`--mode ${args.mode}: use summarization or trim`);
}

const agent = createAgent({ model, tools: [lookup], systemPrompt: replay.system, middleware });

let history = [];
const turnMs = [];
const overheadMs = [];
let refused = 0;
const errors = {};
const t0 = performance.now();
for (let i = 0; i < turns; i++) {
  const user = new HumanMessage(replay.turns[i].user);
  const start = performance.now();
  const modelBefore = modelMs;
  try {
    const state = await agent.invoke({ messages: [...history, user] }, { recursionLimit: 50 });
    history = state.messages;
  } catch (e) {
    // The thread keeps the person's message, as a checkpointer would.
    history = [...history, user];
    const msg = String(e?.message ?? e);
    if (/context_length_exceeded|maximum context length/i.test(msg)) refused++;
    const kind = msg.slice(0, 80);
    errors[kind] = (errors[kind] ?? 0) + 1;
  }
  const wall = performance.now() - start;
  turnMs.push(wall);
  overheadMs.push(wall - (modelMs - modelBefore));
}

const out = {
  mode: args.mode,
  window,
  turns,
  settings,
  refused_turns: refused,
  errors,
  turn_ms: turnMs,
  overhead_ms: overheadMs,
  wall_seconds: (performance.now() - t0) / 1000,
  versions: {
    node: process.version,
    langchain: JSON.parse(readFileSync(new URL("./node_modules/langchain/package.json", import.meta.url))).version,
    "@langchain/openai": JSON.parse(readFileSync(new URL("./node_modules/@langchain/openai/package.json", import.meta.url))).version,
    "@langchain/core": JSON.parse(readFileSync(new URL("./node_modules/@langchain/core/package.json", import.meta.url))).version,
  },
};
writeFileSync(args.out, JSON.stringify(out));
