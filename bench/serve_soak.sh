#!/usr/bin/env bash
# Load and soak test of `tandem serve` on loopback (not part of CI): a small synthetic MoE model,
# CLIENTS concurrent streaming clients for DURATION seconds. Passes when there is no 5xx, no
# dropped connection, and the server's resident memory after the run is within 5% of before it.
# "Before" is after a short warm-up: the first requests page in the memory-mapped weights (file
# pages, counted in the resident size) and give the connection threads their allocator arenas;
# that one-time growth is not a leak. The idle figure is printed too, split into anonymous and
# file pages. Clients hold multi-turn conversations (TURNS, default 4), so most prompts start
# with a finished request's tokens and hit the prefix cache; its memory is the slots' KV caches,
# allocated at start, so the 5% bound covers it too.
# Environment: TANDEM (binary, default build/tandem), CLIENTS (64), DURATION (60 s), PARALLEL (8),
# WARMUP (5), TURNS (4), THREADS (compute threads, default: the server's choice).
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${TANDEM:-build/tandem}
clients=${CLIENTS:-64}
seconds=${DURATION:-60}
parallel=${PARALLEL:-8}
warmup=${WARMUP:-5}
turns=${TURNS:-4}
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
  "${threads_arg[@]}" >"$dir/server.log" 2>&1 &
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

rss_idle=$(rss) parts_idle=$(rss_parts)
node bench/serve_soak.mjs --base "$base" --model soak --clients "$clients" --seconds "$warmup" --turns "$turns" --json >/dev/null
rss_before=$(rss) parts_before=$(rss_parts)
status=0
node bench/serve_soak.mjs --base "$base" --model soak --clients "$clients" --seconds "$seconds" --turns "$turns" || status=$?
sleep 1  # let the last connections close
rss_after=$(rss) parts_after=$(rss_parts)
health=$(curl -s "$base/health")
curl -s "$base/metrics" | grep -E '^tandem_prefix_cache' | sed 's/^/server: /'

echo "resident memory: idle ${rss_idle} KiB, after warm-up ${rss_before} KiB, after the run ${rss_after} KiB"
echo "  idle: ${parts_idle}"
echo "  after warm-up: ${parts_before}"
echo "  after the run: ${parts_after}"
echo "server health after the run: $health"
growth=$(awk -v a="$rss_after" -v b="$rss_before" 'BEGIN { printf "%.2f", (a - b) * 100 / b }')
echo "memory growth over the run: ${growth}%"
if awk -v g="$growth" 'BEGIN { exit !(g > 5 || g < -5) }'; then
  echo "serve_soak: FAILED: resident memory changed by ${growth}% (limit 5%)" >&2
  status=1
fi
if grep -qiE 'error|warn' "$dir/server.log"; then
  echo "server log warnings:" && grep -iE 'error|warn' "$dir/server.log" | head -5
fi
[[ $status == 0 ]] && echo "serve_soak: passed" || echo "serve_soak: FAILED" >&2
exit $status
