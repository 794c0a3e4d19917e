// Load generator for `tandem serve` (driven by bench/serve_soak.sh): N clients stream chat
// completions back to back for a fixed time over keep-alive connections, and the run is judged:
// any 5xx, any dropped connection or any non-200 fails it. Prints requests/s, tokens/s, and
// p50/p99 of the time to first token and of the per-token latency (gaps between tokens).
// Each client holds multi-turn conversations (--turns, default 4): every request resends the
// conversation so far plus a new user turn, as chat clients do, which hits the server's prefix
// cache; the share of prompt tokens served from it is reported, and with --min-cached P the run
// fails when it is below P percent.
// Usage: node serve_soak.mjs --base http://127.0.0.1:PORT --model ID [--clients 64] [--seconds 60] [--turns 4]
//        [--min-cached PERCENT] [--json]
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const base = args.base;
const model = args.model;
const clients = Number(args.clients ?? 64);
const seconds = Number(args.seconds ?? 60);
const turns = Number(args.turns ?? 4);
const minCached = Number(args['min-cached'] ?? 0);

const words = 'the quick brown fox jumps over a lazy dog while seven tired engineers watch the servers hum'.split(' ');

// A deterministic pseudo-random stream per client, so runs are comparable.
function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const stats = {
  requests: 0, tokens: 0, promptTokens: 0, cachedTokens: 0, ttft: [], gaps: [], statuses: {}, dropped: 0, badStreams: 0, errors: [],
};

// Sends the conversation plus a new user turn; on success appends both turns to it.
async function oneRequest(random, conversation) {
  const n = 3 + Math.floor(random() * 40);
  const prompt = Array.from({ length: n }, () => words[Math.floor(random() * words.length)]).join(' ');
  const messages = [...conversation, { role: 'user', content: prompt }];
  const body = {
    model, messages, stream: true, stream_options: { include_usage: true },
    max_tokens: 16 + Math.floor(random() * 48), temperature: 0.8, seed: Math.floor(random() * 1e9),
  };
  const start = performance.now();
  let response;
  try {
    response = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
  } catch (e) {
    stats.dropped++;
    stats.errors.push(`connect: ${e.cause?.code ?? e.message}`);
    return;
  }
  stats.statuses[response.status] = (stats.statuses[response.status] ?? 0) + 1;
  if (response.status !== 200) {
    stats.errors.push(`status ${response.status}: ${(await response.text()).slice(0, 200)}`);
    return;
  }
  let buffer = '', first = 0, last = 0, usage = null, done = false, reply = '';
  const decoder = new TextDecoder();
  try {
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const chunk = JSON.parse(data);
        if (chunk.usage) usage = chunk.usage;
        const content = chunk.choices?.[0]?.delta?.content;
        if (content) {
          reply += content;
          const now = performance.now();
          if (!first) {
            first = now;
            stats.ttft.push(now - start);
          } else {
            stats.gaps.push(now - last);
          }
          last = now;
        }
      }
    }
  } catch (e) {
    stats.dropped++;
    stats.errors.push(`stream: ${e.cause?.code ?? e.message}`);
    return;
  }
  if (!done || !usage) {
    stats.badStreams++;
    stats.errors.push('stream ended without usage or [DONE]');
    return;
  }
  stats.requests++;
  stats.tokens += usage.completion_tokens;
  stats.promptTokens += usage.prompt_tokens;
  stats.cachedTokens += usage.prompt_tokens_details?.cached_tokens ?? 0;
  conversation.push(messages.at(-1), { role: 'assistant', content: reply });
}

async function client(id, deadline) {
  const random = rng(1234 + id);
  let conversation = [];
  while (performance.now() < deadline) {
    if (conversation.length >= 2 * turns) conversation = [];
    const before = conversation.length;
    await oneRequest(random, conversation);
    if (conversation.length === before) conversation = [];  // failed: start a new conversation
  }
}

function percentile(values, p) {
  if (!values.length) return NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, (_, i) => client(i, t0 + seconds * 1000)));
const elapsed = (performance.now() - t0) / 1000;
const fivexx = Object.entries(stats.statuses).filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
const non200 = Object.entries(stats.statuses).filter(([s]) => s != 200).reduce((n, [, c]) => n + c, 0);
const cachedPercent = stats.promptTokens ? (100 * stats.cachedTokens) / stats.promptTokens : 0;
const report = {
  clients, seconds: Number(elapsed.toFixed(1)), requests: stats.requests, tokens: stats.tokens,
  requests_per_s: Number((stats.requests / elapsed).toFixed(2)), tokens_per_s: Number((stats.tokens / elapsed).toFixed(1)),
  ttft_ms_p50: Number(percentile(stats.ttft, 50).toFixed(1)), ttft_ms_p99: Number(percentile(stats.ttft, 99).toFixed(1)),
  token_ms_p50: Number(percentile(stats.gaps, 50).toFixed(2)), token_ms_p99: Number(percentile(stats.gaps, 99).toFixed(2)),
  prompt_tokens: stats.promptTokens, cached_prompt_tokens: stats.cachedTokens,
  statuses: stats.statuses, http_5xx: fivexx, non_200: non200, dropped_connections: stats.dropped, bad_streams: stats.badStreams,
};
if (args.json !== undefined) {
  console.log(JSON.stringify(report));
} else {
  console.log(`clients ${clients}, ${report.seconds} s: ${report.requests} requests, ${report.tokens} tokens`);
  console.log(`  requests/s ${report.requests_per_s}, tokens/s ${report.tokens_per_s}`);
  console.log(`  time to first token p50 ${report.ttft_ms_p50} ms, p99 ${report.ttft_ms_p99} ms`);
  console.log(`  per-token latency   p50 ${report.token_ms_p50} ms, p99 ${report.token_ms_p99} ms`);
  console.log(`  conversations of ${turns} turns: ${stats.cachedTokens} of ${stats.promptTokens} prompt tokens from the prefix cache (${cachedPercent.toFixed(1)}%)`);
  console.log(`  statuses ${JSON.stringify(report.statuses)}, 5xx ${fivexx}, dropped connections ${stats.dropped}, bad streams ${stats.badStreams}`);
}
for (const e of stats.errors.slice(0, 10)) console.error(`  error: ${e}`);
const fewCached = cachedPercent < minCached;
if (fewCached) console.error(`  only ${cachedPercent.toFixed(1)}% of the prompt tokens came from the prefix cache (at least ${minCached}% expected)`);
process.exit(fivexx || non200 || stats.dropped || stats.badStreams || fewCached ? 1 : 0);
