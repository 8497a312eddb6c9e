// Drives a running agentd with the official `openai` npm package, as an
// application would after pointing baseURL at agentd: a Responses chain, a
// conversation, a Chat Completions client that re-sends its whole growing
// history, every call streamed, an answer the client loses (the SDK's own
// retry), a Chat Completions answer whose provider's stream drops midway,
// and a model that reasons. It checks what the SDK itself sees and prints
// one JSON line for the Go test (e2e TestNodeOpenAIClient), which checks
// what the provider received.
//
// Environment: AGENTD_BASE_URL (…/v1), AGENTD_TOKEN, AGENTD_MODEL, TURNS.
import OpenAI from 'openai';

const turns = Number(process.env.TURNS || 20);
const model = process.env.AGENTD_MODEL || 'fake/m';
const client = new OpenAI({
  baseURL: process.env.AGENTD_BASE_URL,
  apiKey: process.env.AGENTD_TOKEN || 'no-token',
  maxRetries: 0,
  timeout: 120_000,
});

function check(ok, what) {
  if (!ok) throw new Error(what);
}

// words makes a message long enough that a small window must fold.
function words(i) {
  return `Message ${i}: ` + Array.from({ length: 60 }, (_, k) => `word${(i * 7 + k) % 97}`).join(' ');
}

// outputText joins a response's output_text parts, as the SDK's
// output_text does for a response it did not stream.
function outputText(r) {
  return r.output
    .filter((o) => o.type === 'message')
    .flatMap((o) => o.content)
    .filter((c) => c.type === 'output_text')
    .map((c) => c.text)
    .join('');
}

// Responses: a previous_response_id chain, streamed.
async function responses() {
  let previous;
  let last;
  for (let i = 0; i < turns; i++) {
    const stream = await client.responses.create({ model, input: words(i), previous_response_id: previous, stream: true });
    let text = '';
    let completed;
    for await (const ev of stream) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') completed = ev.response;
      check(ev.type !== 'response.failed' && ev.type !== 'error', `responses turn ${i}: ${JSON.stringify(ev)}`);
    }
    check(completed, `responses turn ${i}: no response.completed`);
    check(text.length > 0 && outputText(completed) === text, `responses turn ${i}: streamed text ${JSON.stringify(text)} is not the response's ${JSON.stringify(outputText(completed))}`);
    check(completed.usage && completed.usage.input_tokens > 0, `responses turn ${i}: no usage`);
    previous = completed.id;
    last = completed;
  }
  const again = await client.responses.retrieve(last.id);
  check(again.id === last.id && again.output_text === outputText(last), 'responses.retrieve differs from the streamed response');
  return last.id;
}

// Conversations: one made with items, then turns in it.
async function conversations() {
  const conv = await client.conversations.create({
    metadata: { from: 'node' },
    items: [{ type: 'message', role: 'user', content: 'Remember the word lantern.' }],
  });
  check(conv.id && conv.object === 'conversation', `conversations.create: ${JSON.stringify(conv)}`);
  let last;
  for (let i = 0; i < Math.max(2, turns / 4); i++) {
    const stream = await client.responses.create({ model, conversation: conv.id, input: words(1000 + i), stream: true });
    const added = [];
    last = undefined;
    for await (const ev of stream) {
      if (ev.type === 'response.output_item.added') added.push(ev.item.id);
      if (ev.type === 'response.completed') last = ev.response;
      check(ev.type !== 'response.failed' && ev.type !== 'error', `conversation turn ${i}: ${JSON.stringify(ev)}`);
    }
    check(last, `conversation turn ${i}: no response.completed`);
    const ids = last.output.map((o) => o.id);
    check(JSON.stringify(added) === JSON.stringify(ids), `conversation turn ${i}: streamed items ${added}, the response's ${ids}`);
  }
  const items = await client.conversations.items.list(conv.id);
  check(items.data.length >= 3, `conversation has ${items.data.length} items`);
  // An item has one id: the last response's output and input items are
  // the conversation's, read by that id.
  const input = await client.responses.inputItems.list(last.id);
  for (const it of [...last.output, ...input.data]) {
    const got = await client.conversations.items.retrieve(it.id, { conversation_id: conv.id });
    check(got.id === it.id && got.type === it.type, `conversation item ${it.id}: ${JSON.stringify(got)}`);
  }
  return conv.id;
}

// Chat Completions: the client keeps the history and sends all of it.
async function chatCompletions() {
  const messages = [{ role: 'system', content: 'You are terse.' }];
  const chats = new Set();
  let usage = 0;
  for (let i = 0; i < turns; i++) {
    messages.push({ role: 'user', content: words(2000 + i) });
    const { data: stream, response } = await client.chat.completions
      .create({ model, messages, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    chats.add(response.headers.get('x-agentd-chat'));
    let text = '';
    let finish;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage.prompt_tokens;
      for (const c of chunk.choices) {
        text += c.delta?.content || '';
        finish = c.finish_reason || finish;
      }
    }
    check(text.length > 0 && finish === 'stop', `chat turn ${i}: text ${JSON.stringify(text)}, finish ${finish}`);
    check(usage > 0, `chat turn ${i}: no usage chunk`);
    messages.push({ role: 'assistant', content: text });
  }
  check(chats.size === 1 && !chats.has(null), `the growing history went to chats ${JSON.stringify([...chats])}, not one`);
  return { chat: [...chats][0], messages: messages.length };
}

// Chat Completions whose provider's stream drops midway: the SDK raises an
// APIError after the deltas it yielded, streamed or whole, rather than
// ending a cut answer as complete.
async function chatCompletionsCut() {
  const messages = [{ role: 'user', content: 'Please cut your answer short.' }];
  const stream = await client.chat.completions.create({ model, messages, stream: true });
  let text = '';
  let finish;
  let raised;
  try {
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text += c.delta?.content || '';
        finish = c.finish_reason || finish;
      }
    }
  } catch (e) {
    raised = e;
  }
  check(raised instanceof OpenAI.APIError && raised.type === 'server_error' && raised.code === 'provider', `cut stream raised ${raised}`);
  check(text.length > 0 && finish === undefined, `cut stream: text ${JSON.stringify(text)}, finish ${finish}`);
  raised = undefined;
  try {
    await client.chat.completions.create({ model, messages });
  } catch (e) {
    raised = e;
  }
  check(raised instanceof OpenAI.APIError && raised.status === 502 && raised.code === 'provider', `cut whole raised ${raised}`);
  return text.length;
}

// An answer lost on the way back: a client whose first answer to a
// request continuing the chain is read and then lost, as a cut connection
// loses it. The SDK sends the request again by itself (its
// X-Stainless-Retry-Count 1, no idempotency key) and gets the answer the
// chat holds; the Go test checks that the chat stored the message once.
async function lostAnswer(previous) {
  const tries = [];
  const losing = new OpenAI({
    baseURL: process.env.AGENTD_BASE_URL,
    apiKey: process.env.AGENTD_TOKEN || 'no-token',
    maxRetries: 2,
    timeout: 120_000,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const n = new Headers(init.headers).get('x-stainless-retry-count');
      tries.push(n);
      if (n === '0') {
        await res.arrayBuffer();
        throw new TypeError('fetch failed (the script lost this answer)');
      }
      return res;
    },
  });
  const r = await losing.responses.create({ model, input: lostWords, previous_response_id: previous });
  check(tries.join() === '0,1', `the SDK's attempts had retry counts ${JSON.stringify(tries)}, want 0 then 1`);
  check(r.status === 'completed' && outputText(r).length > 0, `the retried response: ${JSON.stringify(r)}`);
  return r.id;
}

// Reasoning: a model that reasons before it answers, as the SDK sees it on
// both surfaces. Chat Completions carries it as `reasoning_content` (an
// extra field the SDK passes through), streamed before the first word and
// whole on the message; Responses gives a reasoning item with summary text
// to a request that asks (`reasoning.summary`), before the message, and
// none to one that does not.
async function reasoning() {
  const messages = [{ role: 'user', content: 'Please think it over first.' }];
  const stream = await client.chat.completions.create({ model, messages, stream: true });
  let thought = '';
  let text = '';
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta?.reasoning_content) {
        check(text === '', `chat reasoning after the answer began: ${JSON.stringify(chunk)}`);
        thought += c.delta.reasoning_content;
      }
      text += c.delta?.content || '';
    }
  }
  check(thought.length > 0 && text.length > 0, `chat stream: reasoning ${JSON.stringify(thought)}, text ${JSON.stringify(text)}`);
  const whole = await client.chat.completions.create({ model, messages });
  const m = whole.choices[0].message;
  check(m.reasoning_content?.length > 0 && m.content.length > 0, `chat whole: ${JSON.stringify(m)}`);

  const rs = await client.responses.create({ model, input: 'Please think it over first.', stream: true, reasoning: { summary: 'auto' } });
  const order = [];
  let summary = '';
  let completed;
  for await (const ev of rs) {
    check(ev.type !== 'response.failed' && ev.type !== 'error', `responses reasoning: ${JSON.stringify(ev)}`);
    if (ev.type === 'response.reasoning_summary_text.delta') summary += ev.delta;
    if (ev.type === 'response.output_item.added') order.push(ev.item.type);
    if (ev.type === 'response.completed') completed = ev.response;
  }
  check(order.join() === 'reasoning,message', `responses items were added in the order ${JSON.stringify(order)}`);
  const item = completed.output.find((o) => o.type === 'reasoning');
  check(summary.length > 0 && item && item.summary.map((p) => p.text).join('') === summary,
    `responses reasoning streamed ${JSON.stringify(summary)}, the completed item holds ${JSON.stringify(item)}`);
  check(completed.output.at(-1).type === 'message' && outputText(completed).length > 0, `responses reasoning: output ${JSON.stringify(completed.output)}`);
  const plain = await client.responses.create({ model, input: 'Please think it over first.' });
  check(plain.output.every((o) => o.type !== 'reasoning'), `a response not asked for reasoning holds ${JSON.stringify(plain.output)}`);
  return summary.length;
}

const lostWords = 'An answer the client lost on the way back.';
const last = await responses();
const out = {
  response: last,
  lost: { words: lostWords, response: await lostAnswer(last) },
  conversation: await conversations(),
  chat_completions: await chatCompletions(),
  cut: await chatCompletionsCut(),
  reasoning: await reasoning(),
};
console.log(JSON.stringify(out));
