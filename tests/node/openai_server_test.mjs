// Drives a running `tandem serve` with the official openai npm client (run by
// tests/server/openai_client_test.cpp). Usage:
//   node openai_server_test.mjs --base http://127.0.0.1:PORT --model ID --scenario NAME [--api-key KEY]
//        [--reference URL]
// Scenarios: api (non-stream, stream, stop strings, usage, errors as exceptions), auth (401),
// concurrent (8 streams at once equal their solo runs), disconnect (an aborted stream frees its
// slot), tools (forced and named calls that parse and fit their schema, streamed as deltas, a
// round trip through a tool result), structured (response_format json_schema and json_object:
// replies that parse and validate), prefix (a second chat turn reuses the first one's KV cache:
// cached_tokens in the usage, the reply the same as without reuse; run with --cache-mem 0, the
// slots only), hostcache (two conversations on one slot take turns: each turn's prefix comes back
// from host memory, the reply that of the --reference server, which runs with --cache-reuse off),
// prefixspeed (the second of two requests sharing a long prefix computes only its new tokens and
// its first token comes several times sooner). Exits 0 when every check passes; prints what
// failed otherwise.
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const base = args.base;
const model = args.model;
const client = (apiKey = args['api-key'] ?? 'unused') =>
  new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });

function log(...what) { console.log(...what); }

async function health() {
  const r = await fetch(`${base}/health`);
  return r.json();
}

// Runs a stream to the end; returns the text, the finish reason, the usage and the chunk count.
async function collect(stream, chat = true) {
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += chat ? (choice.delta?.content ?? '') : (choice.text ?? '');
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

// The token counts of a usage block without the prefix-cache share, which depends on what the
// requests before left in the slots.
function countsOf(usage) {
  const { prompt_tokens_details: details, ...counts } = usage;
  assert.ok(details.cached_tokens >= 0 && details.cached_tokens < usage.prompt_tokens, JSON.stringify(usage));
  return counts;
}

async function expectError(promise, ErrorClass, status) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ErrorClass, `expected ${ErrorClass.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.ok(typeof e.message === 'string' && e.message.length > 0);
    return e;
  }
  assert.fail(`expected ${ErrorClass.name} (${status}), the request succeeded`);
}

const chatRequest = (content, extra = {}) => ({
  model, messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content }],
  max_tokens: 24, temperature: 0, ...extra,
});

async function scenarioApi() {
  const api = client();
  const models = await api.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, model);

  // Non-stream and stream give the same text, finish reason and usage.
  const whole = await api.chat.completions.create(chatRequest('Hello there'));
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.model, model);
  assert.equal(whole.choices.length, 1);
  const message = whole.choices[0].message;
  assert.equal(message.role, 'assistant');
  assert.equal(typeof message.content, 'string');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  const u = whole.usage;
  assert.ok(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.completion_tokens <= 24);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  if (whole.choices[0].finish_reason === 'length') assert.equal(u.completion_tokens, 24);

  const streamed = await collect(await api.chat.completions.create(
    chatRequest('Hello there', { stream: true, stream_options: { include_usage: true } })));
  assert.equal(streamed.text, message.content);
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  // The same prompt again: all of it but its last token comes from the prefix cache.
  assert.deepEqual(countsOf(streamed.usage), countsOf(u));
  assert.ok(streamed.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(streamed.usage));
  assert.ok(streamed.chunks >= 3, 'role chunk, content, finish');
  const noUsage = await collect(await api.chat.completions.create(chatRequest('Hello there', { stream: true })));
  assert.equal(noUsage.usage, null);
  assert.equal(noUsage.text, message.content);
  log('chat: non-stream and stream agree:', JSON.stringify(message.content), u);

  // max_completion_tokens limits like max_tokens.
  const short = await api.chat.completions.create(chatRequest('Hello there', { max_tokens: undefined, max_completion_tokens: 3 }));
  assert.ok(short.usage.completion_tokens <= 3);
  assert.ok(message.content.startsWith(short.choices[0].message.content));

  // Stop strings: cut out, matched wherever token boundaries fall, stream and non-stream alike.
  let checkedStops = 0;
  for (const prompt of ['Hello there', 'Tell me a story', 'abc', 'What is two plus two?']) {
    const reference = await api.chat.completions.create(chatRequest(prompt, { max_tokens: 40 }));
    const chars = Array.from(reference.choices[0].message.content);
    if (chars.length < 8) continue;
    for (const [from, len] of [[3, 2], [5, 3], [chars.length - 2, 2]]) {
      const stop = chars.slice(from, from + len).join('');
      const full = chars.join('');
      const expected = full.slice(0, full.indexOf(stop));
      const r = await api.chat.completions.create(chatRequest(prompt, { max_tokens: 40, stop: [stop, '\u0000never'] }));
      assert.equal(r.choices[0].message.content, expected, `stop ${JSON.stringify(stop)}`);
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.ok(r.usage.completion_tokens <= reference.usage.completion_tokens);
      const s = await collect(await api.chat.completions.create(chatRequest(prompt, { max_tokens: 40, stop, stream: true })));
      assert.equal(s.text, expected, `streamed stop ${JSON.stringify(stop)}`);
      assert.equal(s.finish, 'stop');
      checkedStops++;
    }
  }
  assert.ok(checkedStops >= 3, 'no reply long enough to test stop strings');
  log('stop strings checked:', checkedStops);

  // Text completions: prompt text or token ids, whole and streamed.
  const text = await api.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(text.object, 'text_completion');
  assert.equal(typeof text.choices[0].text, 'string');
  assert.ok(text.usage.completion_tokens > 0 && text.usage.completion_tokens <= 12);
  const textStream = await collect(await api.completions.create(
    { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }), false);
  assert.equal(textStream.text, text.choices[0].text);
  assert.deepEqual(countsOf(textStream.usage), countsOf(text.usage));
  const ids = await api.completions.create({ model, prompt: [72, 101, 108, 108, 111], max_tokens: 5, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, 5);
  log('completions: ok');

  // Seeded sampling repeats itself.
  const seeded = (seed) => api.chat.completions.create(chatRequest('Hello there', { temperature: 1.0, top_p: 0.9, seed }));
  const [a, b] = [await seeded(42), await seeded(42)];
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  // n choices: choice i is seed + i's generation.
  const two = await api.chat.completions.create(chatRequest('Hello there', { temperature: 1.0, top_p: 0.9, seed: 42, n: 2 }));
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0].message.content, a.choices[0].message.content);
  assert.equal(two.choices[1].message.content, (await seeded(43)).choices[0].message.content);

  // Errors surface as the client's exceptions, with OpenAI's fields.
  const bad = await expectError(api.chat.completions.create(chatRequest('x', { temperature: 'hot' })), OpenAI.BadRequestError, 400);
  assert.equal(bad.param, 'temperature');
  await expectError(api.chat.completions.create({ model, max_tokens: 4 }), OpenAI.BadRequestError, 400);
  await expectError(api.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'hi' }] }), OpenAI.BadRequestError, 400);
  await expectError(api.chat.completions.create(chatRequest('x', { max_tokens: 1_000_000 })), OpenAI.BadRequestError, 400);
  await expectError(api.chat.completions.create(chatRequest('x', { n: 17 })), OpenAI.BadRequestError, 400);
  const missing = await expectError(api.chat.completions.create(chatRequest('x', { model: 'no-such-model' })), OpenAI.NotFoundError, 404);
  assert.equal(missing.code, 'model_not_found');
  await expectError(api.chat.completions.create(chatRequest('x', { stream: true, top_p: 7 })), OpenAI.BadRequestError, 400);
  await expectError(api.completions.create({ model, prompt: [1, 2, 99999999], max_tokens: 2 }), OpenAI.BadRequestError, 400);
  // And the server goes on serving.
  const after = await api.chat.completions.create(chatRequest('Hello there'));
  assert.equal(after.choices[0].message.content, message.content);
  log('errors: ok');
}

async function scenarioAuth() {
  await expectError(client('wrong-key').models.list(), OpenAI.AuthenticationError, 401);
  await expectError(client('wrong-key').chat.completions.create(chatRequest('hi')), OpenAI.AuthenticationError, 401);
  const ok = await client().chat.completions.create(chatRequest('hi', { max_tokens: 2 }));
  assert.ok(ok.usage.completion_tokens > 0);
  log('auth: ok');
}

// Eight streams at once, each equal to its solo run: greedy, and seeded sampling.
async function scenarioConcurrent() {
  const api = client();
  const prompts = Array.from({ length: 8 }, (_, i) => `Request number ${i}: ${'words '.repeat(i * 3)}`);
  const requestFor = (i) => chatRequest(prompts[i], {
    max_tokens: 32 + 4 * i, stream: true, stream_options: { include_usage: true },
    ...(i % 2 ? { temperature: 0.9, top_p: 0.95, seed: 1000 + i } : {}),
  });
  const solo = [];
  for (let i = 0; i < 8; i++) solo.push(await collect(await api.chat.completions.create(requestFor(i))));
  for (let round = 0; round < 2; round++) {
    const together = await Promise.all(prompts.map(async (_, i) => collect(await api.chat.completions.create(requestFor(i)))));
    for (let i = 0; i < 8; i++) {
      assert.equal(together[i].text, solo[i].text, `request ${i}, round ${round}`);
      assert.equal(together[i].finish, solo[i].finish);
      assert.deepEqual(countsOf(together[i].usage), countsOf(solo[i].usage));
    }
  }
  const h = await health();
  assert.equal(h.slots_busy, 0);
  log('concurrent: 8 streams equal their solo runs; completion tokens', solo.map((s) => s.usage.completion_tokens));
}

// A client that goes away mid-stream has its request cancelled and its slot freed; the next
// request is served (the server runs one slot and no queue, so a held slot would be a 503).
async function scenarioDisconnect() {
  const api = client();
  const before = await health();
  const stream = await api.chat.completions.create(chatRequest('Tell me everything', { max_tokens: 15000, ignore_eos: true, stream: true }));
  let chunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content !== undefined) chunks++;
    if (chunks === 3) break;  // leaving the loop aborts the HTTP request
  }
  stream.controller.abort();
  let h = await health();
  for (let i = 0; i < 100 && h.slots_busy !== 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    h = await health();
  }
  assert.equal(h.slots_busy, 0, 'the slot was not freed within 10 s');
  assert.equal(h.requests_cancelled, before.requests_cancelled + 1, 'the request was not cancelled');
  const next = await api.chat.completions.create(chatRequest('Hello there', { max_tokens: 8 }));
  assert.ok(next.usage.completion_tokens > 0);
  const nextStream = await collect(await api.chat.completions.create(chatRequest('Hello there', { max_tokens: 8, stream: true })));
  assert.equal(nextStream.text, next.choices[0].message.content);
  log('disconnect: cancelled and freed; next request served');
}

const ajv = new Ajv({ strict: true, allErrors: true });
function expectValid(schema, value, what) {
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${what}: ${JSON.stringify(value)} does not fit the schema: ${ajv.errorsText(validate.errors)}`);
}

// Tools with bounded strings: a random-weight model under a grammar ends its call within the
// token limit (free strings would run on for hundreds of tokens).
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The current weather in a city',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', minLength: 1, maxLength: 16 },
        unit: { enum: ['celsius', 'fahrenheit'] },
        days: { type: 'integer' },
      },
      required: ['city', 'unit'], additionalProperties: false,
    },
  },
};
const timeTool = {
  type: 'function',
  function: {
    name: 'get_time', description: 'The time in a time zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 12 } }, required: ['zone'] },
  },
};
const tools = [weatherTool, timeTool];
const toolSchema = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

function expectCalls(message, what) {
  assert.ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, `${what}: no tool call`);
  for (const call of message.tool_calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.ok(call.function.name in toolSchema, `${what}: unknown function ${call.function.name}`);
    expectValid(toolSchema[call.function.name], JSON.parse(call.function.arguments), what);
  }
}

// A stream's tool call deltas put together, as the OpenAI documentation describes.
async function collectCalls(stream) {
  const calls = [];
  let finish = null, content = '';
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      content += choice.delta?.content ?? '';
      for (const d of choice.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
        const c = calls[d.index];
        if (d.id) c.id = d.id;
        if (d.function?.name) c.function.name += d.function.name;
        if (d.function?.arguments) c.function.arguments += d.function.arguments;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { calls, finish, content };
}

async function tokenCount(text) {
  const r = await fetch(`${base}/tokenize`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: text }) });
  return (await r.json()).tokens.length;
}

async function scenarioTools() {
  const api = client();
  const conversation = [
    { role: 'system', content: 'You answer with the tools.' },
    { role: 'user', content: 'What is the weather in Paris, in celsius?' },
  ];
  const request = (extra) => ({ model, messages: conversation, tools, max_tokens: 1024, temperature: 0.8, ...extra });

  // tool_choice "required": a call that parses and fits its schema, whatever the model.
  const seeds = [1, 2, 3, 4];
  const forced = await Promise.all(seeds.map((seed) =>
    api.chat.completions.create(request({ seed, tool_choice: 'required', parallel_tool_calls: false }))));
  let first = null;
  for (const [i, r] of forced.entries()) {
    const seed = seeds[i];
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', `seed ${seed}`);
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    expectCalls(choice.message, `required, seed ${seed}`);
    first ??= r;
  }
  log('required:', first.choices[0].message.tool_calls[0].function);

  // Streamed: the same call, as deltas; and through the SDK's stream helper.
  const streamed = await collectCalls(await api.chat.completions.create(
    request({ seed: 1, tool_choice: 'required', parallel_tool_calls: false, stream: true })));
  assert.equal(streamed.finish, 'tool_calls');
  assert.equal(streamed.content, '');
  assert.equal(streamed.calls.length, 1);
  assert.match(streamed.calls[0].id, /^call_/);
  assert.deepEqual(streamed.calls[0].function, first.choices[0].message.tool_calls[0].function);
  const helper = await api.chat.completions.stream(request({ seed: 1, tool_choice: 'required', parallel_tool_calls: false })).finalChatCompletion();
  assert.deepEqual(helper.choices[0].message.tool_calls[0].function, first.choices[0].message.tool_calls[0].function);

  // A named function is the one called.
  for (const seed of [1, 2]) {
    const named = await api.chat.completions.create(
      request({ seed, tool_choice: { type: 'function', function: { name: 'get_time' } } }));
    expectCalls(named.choices[0].message, 'named');
    assert.ok(named.choices[0].message.tool_calls.every((c) => c.function.name === 'get_time'));
  }

  // Parallel calls allowed: one or more, each fitting its schema (a random model may go on
  // calling until max_tokens cuts a last call short: that one stays text).
  const parallel = await api.chat.completions.create(request({ seed: 9, tool_choice: 'required', max_tokens: 300 }));
  expectCalls(parallel.choices[0].message, 'parallel');

  // The round trip: the call and its result go back through the template; the model goes on.
  const call = first.choices[0].message.tool_calls[0];
  const result = JSON.stringify({ temperature: 21, sky: 'clear', station: 'Paris-Montsouris' });
  const followUp = [...conversation, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: result }];
  const answer = await api.chat.completions.create({ model, messages: followUp, tools, max_tokens: 16, temperature: 0 });
  assert.ok(['stop', 'length', 'tool_calls'].includes(answer.choices[0].finish_reason));
  if (answer.choices[0].message.tool_calls) expectCalls(answer.choices[0].message, 'auto after the result');
  else assert.equal(typeof answer.choices[0].message.content, 'string');
  // The prompt grew by at least the call and the result.
  const grown = answer.usage.prompt_tokens - first.usage.prompt_tokens;
  assert.ok(grown >= await tokenCount(result) + await tokenCount(call.function.arguments),
    `the prompt grew by ${grown} tokens only`);
  const again = await api.chat.completions.create({ model, messages: followUp, tools, tool_choice: 'required', max_tokens: 1024, seed: 4 });
  expectCalls(again.choices[0].message, 'required after the result');
  // tool_choice "none": text, and no tools in the prompt.
  const none = await api.chat.completions.create({ model, messages: followUp, tools, tool_choice: 'none', max_tokens: 8, temperature: 0 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.ok(none.usage.prompt_tokens < answer.usage.prompt_tokens);
  log('round trip: prompt', first.usage.prompt_tokens, '->', answer.usage.prompt_tokens, 'tokens; answer', JSON.stringify(answer.choices[0].message.content));

  // tool_choice "auto": whatever the model does is served (a random model rarely calls).
  const auto = await api.chat.completions.create(request({ seed: 3, max_tokens: 24 }));
  assert.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason));

  // Errors.
  const noTools = await expectError(api.chat.completions.create({ model, messages: conversation, tool_choice: 'required' }), OpenAI.BadRequestError, 400);
  assert.equal(noTools.param, 'tool_choice');
  await expectError(api.chat.completions.create(request({ tool_choice: { type: 'function', function: { name: 'nope' } } })), OpenAI.BadRequestError, 400);
  const bounded = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } } } } };
  const unenforceable = await expectError(api.chat.completions.create({ model, messages: conversation, tools: [bounded], tool_choice: 'required' }), OpenAI.BadRequestError, 400);
  assert.equal(unenforceable.param, 'tools');
  assert.match(unenforceable.message, /minimum/);
  // Offered (not forced), the same tool is fine: nothing needs its grammar.
  await api.chat.completions.create({ model, messages: conversation, tools: [bounded], max_tokens: 2 });
  log('tools: ok');
}

const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 20 },
    age: { type: 'integer' },
    email: { type: ['string', 'null'], maxLength: 24 },
    role: { enum: ['admin', 'user', 'guest'] },
    scores: { type: 'array', items: { type: 'number' }, maxItems: 4 },
    address: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, zip: { type: 'string', maxLength: 6 } },
      required: ['city'], additionalProperties: false,
    },
    active: { type: 'boolean' },
  },
  required: ['name', 'age', 'role', 'address', 'active'],
  additionalProperties: false,
};

async function scenarioStructured() {
  const api = client();
  const request = (extra) => ({
    model, messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 1500, temperature: 1, ...extra,
  });
  const format = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } };
  const seeds = [1, 2, 3, 4, 5, 6];
  const replies = await Promise.all(seeds.map((seed) => api.chat.completions.create(request({ seed, response_format: format }))));
  let sample = null;
  for (const [i, r] of replies.entries()) {
    const seed = seeds[i];
    assert.equal(r.choices[0].finish_reason, 'stop', `seed ${seed}: ${r.usage.completion_tokens} tokens`);
    expectValid(personSchema, JSON.parse(r.choices[0].message.content), `json_schema, seed ${seed}`);
    sample ??= r;
  }
  log('json_schema:', sample.choices[0].message.content.replace(/\s+/g, ' '));
  const streamed = await collect(await api.chat.completions.create(request({ seed: 1, response_format: format, stream: true })));
  assert.equal(streamed.text, sample.choices[0].message.content);
  assert.equal(streamed.finish, 'stop');

  // json_object: any object. Free strings make a random model's replies long: of a few seeds,
  // those that end are checked (and some must end).
  let ended = 0;
  const objects = await Promise.all([1, 2, 3, 4].map((seed) =>
    api.chat.completions.create(request({ seed, response_format: { type: 'json_object' }, max_tokens: 800 }))));
  for (const r of objects) {
    if (r.choices[0].finish_reason !== 'stop') continue;
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), r.choices[0].message.content);
    ended++;
  }
  assert.ok(ended >= 1, 'no json_object reply ended within 800 tokens');

  // llama.cpp's extensions on /v1/completions: json_schema and a GBNF grammar.
  const post = async (body) => (await fetch(`${base}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer unused' }, body: JSON.stringify(body),
  })).json();
  const listSchema = { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 2, maxItems: 3 };
  const list = await post({ model, prompt: 'Colors:', json_schema: listSchema, max_tokens: 200, seed: 2 });
  expectValid(listSchema, JSON.parse(list.choices[0].text), 'completions json_schema');
  const yesNo = await post({ model, prompt: 'Answer:', grammar: 'root ::= ("yes" | "no") "."', max_tokens: 10, seed: 5 });
  assert.match(yesNo.choices[0].text, /^(yes|no)\.$/);

  // A schema the grammar cannot hold the output to is refused, naming the keyword.
  const bad = await expectError(api.chat.completions.create(request({
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
  })), OpenAI.BadRequestError, 400);
  assert.equal(bad.param, 'response_format');
  assert.match(bad.message, /pattern/);
  log('structured: ok');
}

// Run against a server with one slot and no prefix cache beyond it (--cache-mem 0), so each
// request evicts what the one before kept.
async function scenarioPrefix() {
  const api = client();
  const facts = Array.from({ length: 40 }, (_, i) => `Fact ${i} is ${(i * 7) % 13}.`).join(' ');
  const first = [{ role: 'system', content: `You are a careful assistant. ${facts}` },
    { role: 'user', content: 'What is fact 3?' }];
  // Seeded sampling: the same request gives the same reply, so reuse must not change it.
  const request = (messages, extra = {}) => ({ model, messages, max_tokens: 16, temperature: 0.9, seed: 42, ...extra });
  const a = await api.chat.completions.create(request(first));
  assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
  const second = [...first, { role: 'assistant', content: a.choices[0].message.content },
    { role: 'user', content: 'And fact 5?' }];
  const reused = await api.chat.completions.create(request(second));
  const cached = reused.usage.prompt_tokens_details.cached_tokens;
  // The whole first prompt is shared (its reply may tokenize differently when rendered back).
  assert.ok(cached >= a.usage.prompt_tokens - 2 && cached < reused.usage.prompt_tokens,
    `cached ${cached} of ${reused.usage.prompt_tokens}; the first turn had ${a.usage.prompt_tokens}`);

  // Another prompt takes the slot; the second turn again is computed whole (but a BOS token).
  await api.completions.create({ model, prompt: 'zzz zzz zzz', max_tokens: 2, temperature: 0 });
  const computed = await api.chat.completions.create(request(second));
  assert.ok(computed.usage.prompt_tokens_details.cached_tokens <= 1, JSON.stringify(computed.usage));
  assert.equal(computed.choices[0].message.content, reused.choices[0].message.content);

  // The same request once more, streamed: everything but the last prompt token is reused.
  const streamed = await collect(await api.chat.completions.create(
    request(second, { stream: true, stream_options: { include_usage: true } })));
  assert.equal(streamed.usage.prompt_tokens_details.cached_tokens, reused.usage.prompt_tokens - 1);
  assert.equal(streamed.text, reused.choices[0].message.content);

  const metrics = await (await fetch(`${base}/metrics`)).text();
  const hits = Number(metrics.match(/^tandem_prefix_cache_hits_total (\d+)$/m)?.[1]);
  assert.ok(hits >= 2, `tandem_prefix_cache_hits_total ${hits}`);
  log('prefix: second turn reused', cached, 'of', reused.usage.prompt_tokens, 'prompt tokens; same reply:',
    JSON.stringify(reused.choices[0].message.content));
}

// A long system prompt of numbered facts; `tag` goes first so that prompts of different tags
// share only the chat template's first tokens.
const factsPrompt = (tag, n) =>
  `${tag}. You are a careful assistant. ` + Array.from({ length: n }, (_, i) => `Fact ${i} is ${(i * 7) % 13}.`).join(' ');

async function metricValue(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} missing from /metrics`);
  return Number(m[1]);
}

// Run against a server with one slot and the default prefix cache in host memory, and a
// --reference server with reuse off.
async function scenarioHostCache() {
  assert.ok(args.reference, '--reference URL is required');
  const api = client();
  const reference = new OpenAI({ baseURL: `${args.reference}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
  const request = (messages) => ({ model, messages, max_tokens: 12, temperature: 0.9, seed: 7 });
  const firsts = [], seconds = [];
  for (const tag of ['Conversation A', 'Conversation B']) {
    const messages = [{ role: 'system', content: factsPrompt(tag, 30) }, { role: 'user', content: 'What is fact 3?' }];
    const r = await api.chat.completions.create(request(messages));
    firsts.push({ messages, reply: r });
  }
  // Each second turn finds the slot holding the other conversation: its own comes back from
  // host memory, so everything its first turn had is reused.
  for (const { messages, reply } of firsts) {
    const next = [...messages, { role: 'assistant', content: reply.choices[0].message.content },
      { role: 'user', content: 'And fact 5?' }];
    const r = await api.chat.completions.create(request(next));
    const cached = r.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= reply.usage.prompt_tokens - 2 && cached < r.usage.prompt_tokens,
      `cached ${cached} of ${r.usage.prompt_tokens}; the first turn had ${reply.usage.prompt_tokens}`);
    assert.equal(r.timings.cache_n, cached);
    assert.equal(r.timings.prompt_n, r.usage.prompt_tokens - cached);
    const whole = await reference.chat.completions.create(request(next));
    assert.equal(whole.usage.prompt_tokens_details.cached_tokens, 0);
    assert.equal(r.choices[0].message.content, whole.choices[0].message.content);
    seconds.push(cached);
  }
  const loads = await metricValue('tandem_prefix_cache_loads_total');
  const bytes = await metricValue('tandem_prefix_cache_bytes');
  const budget = await metricValue('tandem_prefix_cache_budget_bytes');
  assert.ok(loads >= 2, `tandem_prefix_cache_loads_total ${loads}`);
  assert.ok(bytes > 0 && bytes <= budget, `tandem_prefix_cache_bytes ${bytes} of ${budget}`);
  assert.ok(await metricValue('tandem_prefix_cache_entries') >= 1);
  log('hostcache: second turns reused', seconds, 'prompt tokens from host memory;', bytes, 'bytes held of', budget);
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

// Run against a server with one slot. Each try has its own long prefix: the first request
// computes all of it, the second (another question after the same prefix) only its question.
// Times are medians over the tries, so one slow moment of a busy machine does not decide.
async function scenarioPrefixSpeed() {
  const api = client();
  const tries = 5;
  const cold = { server: [], client: [] }, warm = { server: [], client: [] };
  let promptTokens = 0, computed = 0;
  for (let i = 0; i < tries; ++i) {
    const system = { role: 'system', content: factsPrompt(`Session ${i}`, 250) };
    for (const [question, into] of [['What is fact 3?', cold], ['And what is fact 5, then?', warm]]) {
      const start = performance.now();
      const r = await api.chat.completions.create({
        model, messages: [system, { role: 'user', content: question }], max_tokens: 1, temperature: 0,
      });
      into.client.push(performance.now() - start);
      into.server.push(r.timings.time_to_first_token_ms);
      const cached = r.usage.prompt_tokens_details.cached_tokens;
      assert.equal(r.timings.cache_n, cached);
      assert.equal(r.timings.prompt_n, r.usage.prompt_tokens - cached);
      assert.ok(r.timings.time_to_first_token_ms > 0 && r.timings.time_to_first_token_ms <= into.client.at(-1),
        JSON.stringify(r.timings));
      if (into === cold) {
        promptTokens = r.usage.prompt_tokens;
        // Only the chat template's first tokens are shared with the tries before.
        assert.ok(cached < 20, `a new prefix reused ${cached} tokens`);
      } else {
        // Everything up to the question is reused; only the question and what follows it are computed.
        computed = r.usage.prompt_tokens - cached;
        assert.ok(cached >= promptTokens - 30 && computed <= 40,
          `reused ${cached} of ${r.usage.prompt_tokens} prompt tokens (the first request had ${promptTokens})`);
      }
    }
  }
  const ratio = median(cold.server) / median(warm.server);
  const clientRatio = median(cold.client) / median(warm.client);
  log(`prefixspeed: ${promptTokens} prompt tokens, the second request computed ${computed};`,
    `time to first token ${median(cold.server).toFixed(1)} ms against ${median(warm.server).toFixed(1)} ms`,
    `(x${ratio.toFixed(1)}; as the client saw it ${median(cold.client).toFixed(1)} ms against`,
    `${median(warm.client).toFixed(1)} ms, x${clientRatio.toFixed(1)})`);
  // The work differs ~100-fold; the margins allow for a loaded two-core machine.
  assert.ok(ratio >= 4, `time to first token only ${ratio.toFixed(2)} times lower with the prefix reused`);
  assert.ok(clientRatio >= 2, `request time only ${clientRatio.toFixed(2)} times lower with the prefix reused`);
}

const scenarios = {
  api: scenarioApi, auth: scenarioAuth, concurrent: scenarioConcurrent, disconnect: scenarioDisconnect,
  tools: scenarioTools, structured: scenarioStructured, prefix: scenarioPrefix, hostcache: scenarioHostCache,
  prefixspeed: scenarioPrefixSpeed,
};
const run = scenarios[args.scenario];
if (!run || !base || !model) {
  console.error(`usage: openai_server_test.mjs --base URL --model ID --scenario ${Object.keys(scenarios).join('|')}`);
  process.exit(2);
}
try {
  await run();
  log(`scenario ${args.scenario}: passed`);
} catch (e) {
  console.error(`scenario ${args.scenario}: FAILED\n${e.stack ?? e}`);
  process.exit(1);
}
