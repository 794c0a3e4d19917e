// Drives a running `tandem serve` with the official @anthropic-ai/sdk client (run by
// tests/server/anthropic_client_test.cpp). Usage:
//   node anthropic_server_test.mjs --base http://127.0.0.1:PORT --model ID --scenario NAME [--api-key KEY]
// Scenarios: messages (system prompts, whole and streamed replies that agree, the event sequence,
// stop sequences, token counting, the same answer as /v1/chat/completions, errors as the SDK's
// exceptions), tools (tool_use blocks that fit their input schema, streamed, a round trip through
// a tool_result), auth (x-api-key). Exits 0 when every check passes; prints what failed otherwise.
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import OpenAI from 'openai';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const base = args.base;
const model = args.model;
const client = (apiKey = args['api-key'] ?? 'unused') =>
  new Anthropic({ baseURL: base, apiKey, maxRetries: 0, timeout: 60_000 });

function log(...what) { console.log(...what); }

async function expectError(promise, ErrorClass, status, type) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ErrorClass, `expected ${ErrorClass.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    // Anthropic's error body: {"type": "error", "error": {"type", "message"}}.
    assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
    assert.equal(e.error?.error?.type, type, JSON.stringify(e.error));
    assert.ok(e.error.error.message.length > 0);
    return e;
  }
  assert.fail(`expected ${ErrorClass.name} (${status}), the request succeeded`);
}

const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

// Raw events of a streamed reply, checked for Anthropic's order; returns them with the text.
async function collectEvents(stream) {
  const events = [];
  for await (const e of stream) events.push(e);
  assert.equal(events[0].type, 'message_start');
  assert.equal(events.at(-1).type, 'message_stop');
  assert.equal(events.at(-2).type, 'message_delta');
  let open = null, next = 0, text = '';
  const blocks = [];
  for (const e of events.slice(1, -2)) {
    if (e.type === 'ping') continue;
    if (e.type === 'content_block_start') {
      assert.equal(open, null, 'a block opened inside another');
      assert.equal(e.index, next);
      open = e.index;
      blocks.push({ ...e.content_block, json: '' });
    } else if (e.type === 'content_block_delta') {
      assert.equal(e.index, open);
      if (e.delta.type === 'text_delta') text += e.delta.text;
      else if (e.delta.type === 'input_json_delta') blocks.at(-1).json += e.delta.partial_json;
      else assert.fail(`unexpected delta ${e.delta.type}`);
    } else if (e.type === 'content_block_stop') {
      assert.equal(e.index, open);
      open = null;
      next++;
    } else {
      assert.fail(`unexpected event ${e.type}`);
    }
  }
  assert.equal(open, null, 'a block was left open');
  return { events, text, blocks, start: events[0].message, delta: events.at(-2) };
}

const ajv = new Ajv({ strict: true, allErrors: true });
function expectValid(schema, value, what) {
  const validate = ajv.compile(schema);
  assert.ok(validate(value), `${what}: ${JSON.stringify(value)} does not fit: ${ajv.errorsText(validate.errors)}`);
}

async function scenarioMessages() {
  const api = client();
  const params = {
    model, max_tokens: 24, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: 'Hello there' }],
  };
  const whole = await api.messages.create(params);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.equal(whole.model, model);
  assert.match(whole.id, /^msg_/);
  assert.equal(whole.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(whole.stop_reason));
  assert.equal(whole.stop_sequence, null);
  assert.ok(whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 24);
  if (whole.stop_reason === 'max_tokens') assert.equal(whole.usage.output_tokens, 24);

  // The system prompt reaches the model: the same turn through OpenAI's API with the same system
  // message is the same prompt and the same greedy answer.
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: args['api-key'] ?? 'unused', maxRetries: 0 });
  const same = await openai.chat.completions.create({
    model, max_tokens: 24, temperature: 0,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hello there' }],
  });
  assert.equal(same.usage.prompt_tokens, whole.usage.input_tokens);
  assert.equal(same.choices[0].message.content, textOf(whole));
  const noSystem = await api.messages.create({ ...params, system: undefined });
  assert.ok(noSystem.usage.input_tokens < whole.usage.input_tokens);
  // System as a list of text blocks reads the same.
  const blocks = await api.messages.create({ ...params, system: [{ type: 'text', text: 'You are terse.' }] });
  assert.equal(textOf(blocks), textOf(whole));

  // Streamed: Anthropic's event order, and the same message.
  const raw = await collectEvents(await api.messages.create({ ...params, stream: true }));
  assert.equal(raw.text, textOf(whole));
  assert.equal(raw.start.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(raw.start.id.startsWith('msg_'), true);
  assert.equal(raw.delta.delta.stop_reason, whole.stop_reason);
  assert.equal(raw.delta.usage.output_tokens, whole.usage.output_tokens);
  const final = await api.messages.stream(params).finalMessage();
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  log('messages: whole and streamed agree:', JSON.stringify(textOf(whole)), whole.usage);

  // Stop sequences: cut out, reported, streamed alike.
  const reference = await api.messages.create({ ...params, max_tokens: 40 });
  const chars = Array.from(textOf(reference));
  assert.ok(chars.length >= 8, 'the reply is too short to test stop sequences');
  const stop = chars.slice(4, 7).join('');
  const full = chars.join('');
  const cut = await api.messages.create({ ...params, max_tokens: 40, stop_sequences: ['\u0000never', stop] });
  assert.equal(textOf(cut), full.slice(0, full.indexOf(stop)));
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  const cutStream = await collectEvents(await api.messages.create({ ...params, max_tokens: 40, stop_sequences: [stop], stream: true }));
  assert.equal(cutStream.text, textOf(cut));
  assert.equal(cutStream.delta.delta.stop_reason, 'stop_sequence');
  assert.equal(cutStream.delta.delta.stop_sequence, stop);

  // Multi-turn conversations with content blocks.
  const turns = await api.messages.create({
    ...params,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Name a color.' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Blue.' }] },
      { role: 'user', content: 'Another?' },
    ],
  });
  assert.ok(turns.usage.input_tokens > whole.usage.input_tokens);

  // Token counting: the prompt of the same request.
  const counted = await api.messages.countTokens({ model, system: params.system, messages: params.messages });
  assert.equal(counted.input_tokens, whole.usage.input_tokens);

  // Errors in Anthropic's shape, as the SDK's exceptions; the server goes on.
  await expectError(api.messages.create({ model, messages: params.messages }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({ ...params, messages: [] }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({ ...params, messages: [{ role: 'robot', content: 'x' }] }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({ ...params, max_tokens: 10_000_000 }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({
    ...params, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
  }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({ ...params, model: 'no-such-model' }), Anthropic.NotFoundError, 404, 'not_found_error');
  const after = await api.messages.create(params);
  assert.equal(textOf(after), textOf(whole));
  log('messages: ok');
}

const weather = {
  name: 'get_weather', description: 'The current weather in a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', minLength: 1, maxLength: 16 }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'], additionalProperties: false,
  },
};
const clock = {
  name: 'get_time', description: 'The time in a time zone',
  input_schema: { type: 'object', properties: { zone: { type: 'string', maxLength: 12 } }, required: ['zone'] },
};
const schemas = { get_weather: weather.input_schema, get_time: clock.input_schema };

function expectToolUse(message, what) {
  const uses = message.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, `${what}: no tool_use block in ${JSON.stringify(message.content)}`);
  assert.equal(message.stop_reason, 'tool_use');
  for (const u of uses) {
    assert.match(u.id, /^toolu_/);
    assert.ok(u.name in schemas, u.name);
    expectValid(schemas[u.name], u.input, what);
  }
  return uses;
}

async function scenarioTools() {
  const api = client();
  const params = {
    model, max_tokens: 1024, temperature: 0, tools: [weather, clock],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
  };
  const whole = await api.messages.create(params);
  const [use] = expectToolUse(whole, 'any');
  assert.equal(whole.content.filter((b) => b.type === 'tool_use').length, 1);
  log('tool_use:', use.name, JSON.stringify(use.input));

  // Streamed: a tool_use block whose input arrives as input_json_delta.
  const raw = await collectEvents(await api.messages.create({ ...params, stream: true }));
  const streamedUse = raw.blocks.find((b) => b.type === 'tool_use');
  assert.ok(streamedUse, 'no tool_use block in the stream');
  assert.equal(streamedUse.name, use.name);
  assert.deepEqual(JSON.parse(streamedUse.json), use.input);
  assert.equal(raw.delta.delta.stop_reason, 'tool_use');
  const final = await api.messages.stream(params).finalMessage();
  assert.deepEqual(final.content.map((b) => b.type === 'tool_use' ? [b.name, b.input] : b), whole.content.map((b) => b.type === 'tool_use' ? [b.name, b.input] : b));

  // A named tool, sampled.
  for (const seed of [1, 2]) {
    const named = await api.messages.create({ ...params, temperature: 1, tool_choice: { type: 'tool', name: 'get_time', disable_parallel_tool_use: true }, metadata: { user_id: `u${seed}` } });
    assert.ok(expectToolUse(named, 'named').every((u) => u.name === 'get_time'));
  }

  // The round trip: the tool_use and its tool_result go back through the template.
  const followUp = [
    ...params.messages,
    { role: 'assistant', content: whole.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees and clear skies over the fjord' }] },
  ];
  const answer = await api.messages.create({ ...params, tool_choice: { type: 'auto' }, messages: followUp, max_tokens: 16 });
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(answer.stop_reason));
  assert.ok(answer.usage.input_tokens > whole.usage.input_tokens + 8, `${answer.usage.input_tokens} vs ${whole.usage.input_tokens}`);
  const again = await api.messages.create({ ...params, messages: followUp });
  expectToolUse(again, 'any after the result');
  // tool_choice none: text only.
  const none = await api.messages.create({ ...params, tool_choice: { type: 'none' }, messages: followUp, max_tokens: 8 });
  assert.ok(none.content.every((b) => b.type === 'text'));

  await expectError(api.messages.create({ ...params, tool_choice: { type: 'tool', name: 'nope' } }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  await expectError(api.messages.create({ ...params, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  log('tools: ok');
}

async function scenarioAuth() {
  await expectError(client('wrong-key').messages.create({ model, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    Anthropic.AuthenticationError, 401, 'authentication_error');
  const ok = await client().messages.create({ model, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
  assert.ok(ok.usage.output_tokens > 0);
  log('auth: ok');
}

const scenarios = { messages: scenarioMessages, tools: scenarioTools, auth: scenarioAuth };
const run = scenarios[args.scenario];
if (!run || !base || !model) {
  console.error(`usage: anthropic_server_test.mjs --base URL --model ID --scenario ${Object.keys(scenarios).join('|')}`);
  process.exit(2);
}
try {
  await run();
  log(`scenario ${args.scenario}: passed`);
} catch (e) {
  console.error(`scenario ${args.scenario}: FAILED\n${e.stack ?? e}`);
  process.exit(1);
}
