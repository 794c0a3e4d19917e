#!/usr/bin/env bash
# Load and soak test of `tandem serve` on loopback (not part of CI): a small synthetic MoE model,
# CLIENTS concurrent streaming clients for DURATION seconds. Clients hold multi-turn
# conversations (TURNS, default 4): every request resends the conversation so far, as chat
# clients do, so most prompts start with a finished request's tokens and hit the prefix cache,
# in the slots or, with more conversations than slots, in host memory (--cache-mem CACHE_MEM
# MiB: about the conversations of 64 clients at once; finished ones are evicted as the run goes).
# Passes when there is no 5xx, no dropped connection, no warning or error in the server's log,
# a share of the prompt tokens came from the prefix cache (MIN_CACHED percent), the prefix cache
# held at most its budget, and the server's resident memory stayed within 5% of what it was
# before the run (the prefix cache left out) plus the prefix cache's budget (sampled every second,
# and after the run).
# "Before" is after a short warm-up: the first requests page in the memory-mapped weights (file
# pages, counted in the resident size) and give the connection threads their allocator arenas;
# that one-time growth is not a leak. The idle figure is printed too, split into anonymous and
# file pages.
# Environment: TANDEM (binary, default build/tandem), CLIENTS (64), DURATION (60 s), PARALLEL (8),
# WARMUP (5), TURNS (4), CACHE_MEM (64 MiB), MIN_CACHED (30 %), THREADS (compute threads,
# default: the server's choice).
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${TANDEM:-build/tandem}
clients=${CLIENTS:-64}
seconds=${DURATION:-60}
parallel=${PARALLEL:-8}
warmup=${WARMUP:-5}
turns=${TURNS:-4}
cache_mib=${CACHE_MEM:-64}
min_cached=${MIN_CACHED:-30}
threads_arg=()
[[ -n "${THREADS:-}" ]] && threads_arg=(--threads "$THREADS")

dir=$(mktemp -d)
server=""
cleanup() {
  if [[ -n "$server" ]] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

"$tandem" synth --arch qwen3moe --layers 2 --embd 256 --heads 4 --kv-heads 2 --head-dim 64 --experts 8 \
  --experts-used 2 --expert-ffn 256 --seed 11 --out "$dir/soak.gguf" >/dev/null
"$tandem" serve -m "$dir/soak.gguf" --port 0 --parallel "$parallel" --queue "$clients" --ctx 4096 \
  --cache-mem "$cache_mib" "${threads_arg[@]}" >"$dir/server.log" 2>&1 &
server=$!

port=""
for _ in $(seq 300); do
  port=$(grep -oE 'listening on http://[^:]+:[0-9]+' "$dir/server.log" | grep -oE '[0-9]+$' || true)
  [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
if [[ -z "$port" ]] || ! curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
  echo "serve_soak: the server did not start" >&2
  cat "$dir/server.log" >&2
  exit 1
fi
base="http://127.0.0.1:$port"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
rss_parts() { awk '/^RssAnon|^RssFile/ {printf "%s %s KiB ", $1, $2}' "/proc/$server/status"; }
grep -E 'serve:|cpu:' "$dir/server.log" | sed 's/^/server: /'

metric() { curl -s "$base/metrics" | awk -v name="$1" '$1 == name {print $2}'; }

rss_idle=$(rss) parts_idle=$(rss_parts)
node bench/serve_soak.mjs --base "$base" --model soak --clients "$clients" --seconds "$warmup" --turns "$turns" --json >/dev/null
rss_before=$(rss) parts_before=$(rss_parts) cache_before=$(metric tandem_prefix_cache_bytes)
# The warm-up may have filled the prefix cache already: the rest of the resident memory may grow
# by 5%, the prefix cache up to its budget.
limit=$(awk -v b="$rss_before" -v h="${cache_before:-0}" -v c="$cache_mib" \
  'BEGIN { printf "%d", (b - h / 1024) * 1.05 + c * 1024 }')
status=0
rss_max=$rss_before cache_max=0
( while sleep 1; do
    r=$(rss) c=$(metric tandem_prefix_cache_bytes)
    echo "$r ${c:-0}"
  done ) >"$dir/samples" &
sampler=$!
node bench/serve_soak.mjs --base "$base" --model soak --clients "$clients" --seconds "$seconds" --turns "$turns" \
  --min-cached "$min_cached" || status=$?
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sleep 1  # let the last connections close
rss_after=$(rss) parts_after=$(rss_parts)
health=$(curl -s "$base/health")
curl -s "$base/metrics" | grep -E '^tandem_prefix_cache' | sed 's/^/server: /'
read -r rss_max cache_max < <(awk -v r="$rss_after" 'BEGIN { m = r; c = 0 } { if ($1 > m) m = $1; if ($2 > c) c = $2 } END { printf "%d %d\n", m, c }' "$dir/samples")
budget=$(metric tandem_prefix_cache_budget_bytes)

echo "resident memory: idle ${rss_idle} KiB, after warm-up ${rss_before} KiB (of which the prefix cache $(( ${cache_before:-0} / 1024 )) KiB), after the run ${rss_after} KiB, largest during it ${rss_max} KiB (limit ${limit} KiB)"
echo "  idle: ${parts_idle}"
echo "  after warm-up: ${parts_before}"
echo "  after the run: ${parts_after}"
echo "prefix cache in host memory: at most ${cache_max} bytes held during the run, budget ${budget} bytes"
echo "server health after the run: $health"
if (( rss_max > limit )); then
  echo "serve_soak: FAILED: resident memory reached ${rss_max} KiB, beyond ${limit} KiB (5% over what is not the prefix cache, plus its ${cache_mib} MiB)" >&2
  status=1
fi
if awk -v c="$cache_max" -v b="$budget" 'BEGIN { exit !(c > b) }'; then
  echo "serve_soak: FAILED: the prefix cache held ${cache_max} bytes, beyond its budget of ${budget}" >&2
  status=1
fi
if grep -qE '^(warning|error): ' "$dir/server.log"; then
  echo "serve_soak: FAILED: warnings or errors in the server log:" >&2
  grep -E '^(warning|error): ' "$dir/server.log" | head -5 >&2
  status=1
fi
[[ $status == 0 ]] && echo "serve_soak: passed" || echo "serve_soak: FAILED" >&2
exit $status
