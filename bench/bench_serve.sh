#!/bin/sh
# bench/bench_serve.sh [BUILD_DIR] - tools/ptserve under tools/ptload's load, JSON lines (make copies it to
# build/bench_serve, which finds build/ptserve, build/ptload and build/bench_serve_engine beside itself).
# The model: GPT-2 124M's shape (12 layers, width 768, 12 heads) with a byte vocabulary (85M parameters) in q8_0,
# random weights, as GGUF (bench_serve_engine export; kept in SERVE_DIR and reused). ptserve on a free loopback
# port, --threads SERVE_THREADS (2) --max-seqs SERVE_MAX_SEQS (8). Every request: SERVE_PROMPT (16) words of
# prompt, max_tokens SERVE_OUTPUT (24), temperature 0.8, streamed; SERVE_REQUESTS (16) per run.
# 1. HTTP overhead, first: all the requests at once through ptserve (ptload --rate 10000) vs the same requests
#    submitted to pt_engine directly on the same file, same max_running, token budget and threads
#    (bench_serve_engine run), twice each, interleaved, the better of each kept:
#    {"bench":"serve_overhead","http_tokens_per_s":..,"engine_tokens_per_s":..,"ratio":..,"load1":..} (target >= 0.9)
# 2. Poisson arrivals at SERVE_RATES (default "0.25 0.5 1 2 4") times the saturated request rate found in 1
#    (http tokens/s / SERVE_OUTPUT), one ptload run each:
#    {"bench":"serve","rate":R,"p50_ttft_s":..,"p99_ttft_s":..,"p99_tpot_s":..,"tokens_per_s":..,"goodput":..,"refused":..}
#    goodput: requests/s with TTFT <= 1 s and TPOT <= 0.2 s (ptload's default SLOs).
set -u
B=${1:-$(dirname "$0")}
W=${SERVE_DIR:-${TMPDIR:-/tmp}/ptrain_bench_serve}
N=${SERVE_REQUESTS:-16}
P=${SERVE_PROMPT:-16}
O=${SERVE_OUTPUT:-24}
M=${SERVE_MAX_SEQS:-8}
T=${SERVE_THREADS:-2}
export OMP_WAIT_POLICY=passive
unset PTRAIN_PROGRESS
mkdir -p "$W"
MODEL=$W/gpt2-85m-bytes-q8_0.gguf
if [ ! -s "$MODEL" ]; then
    "$B/bench_serve_engine" export "$MODEL" && rm -rf "$MODEL.ckpt" || { echo "bench serve: cannot write the model $MODEL" >&2; exit 1; }
fi

"$B/ptserve" --gguf "$MODEL" --port 0 --threads "$T" --max-seqs "$M" >"$W/ptserve.out" 2>"$W/ptserve.err" &
SPID=$!
trap 'kill $SPID 2>/dev/null' EXIT
URL=""
t=0
while [ $t -lt 1200 ] && [ -z "$URL" ]; do
    URL=$(sed -n 's/^ptserve: listening on //p' "$W/ptserve.out" 2>/dev/null)
    [ -n "$URL" ] || { kill -0 $SPID 2>/dev/null || break; sleep 0.1; t=$((t + 1)); }
done
[ -n "$URL" ] || { echo "bench serve: ptserve did not start: $(head -c 600 "$W/ptserve.err")" >&2; exit 1; }
URL=${URL%/}

# load RATE: one ptload run, its JSON line in $W/load.json
load() {
    "$B/ptload" --url "$URL" --rate "$1" --requests "$N" --prompt-len "$P" --output-len "$O" --timeout 300 >"$W/load.out" 2>"$W/load.err"
    r=$?
    grep '^{' "$W/load.out" | tail -n 1 >"$W/load.json"
    [ $r -eq 0 ] && [ -s "$W/load.json" ] || { echo "bench serve: ptload --rate $1 exit $r: $(tail -n 3 "$W/load.err")" >&2; return 1; }
}
# field NAME: a number of $W/load.json
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" "$W/load.json"; }
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

rc=0
http=0 eng=0
for rep in 1 2; do
    e=$("$B/bench_serve_engine" run "$MODEL" "$N" "$P" "$O" "$M" "$T" | sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p')
    [ -n "$e" ] || { echo "bench serve: bench_serve_engine failed" >&2; rc=1; }
    eng=$(max "$eng" "$e")
    if load 10000; then http=$(max "$http" "$(field output_throughput)"); else rc=1; fi
done
load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo null)
awk -v h="$http" -v e="$eng" -v n="$N" -v p="$P" -v o="$O" -v m="$M" -v t="$T" -v l="$load1" 'BEGIN {
    printf "{\"bench\":\"serve_overhead\",\"model\":\"gpt2-85m-bytes\",\"format\":\"q8_0\",\"requests\":%d,\"prompt_words\":%d,\"output_tokens\":%d,\"max_seqs\":%d,\"threads\":%d,\"http_tokens_per_s\":%.2f,\"engine_tokens_per_s\":%.2f,\"ratio\":%.3f,\"load1\":%s}\n", n, p, o, m, t, h, e, (e > 0 ? h / e : 0), l }'

sat=$(awk -v h="$http" -v o="$O" 'BEGIN { printf "%.4f", h / o }')
for x in ${SERVE_RATES:-0.25 0.5 1 2 4}; do
    R=$(awk -v s="$sat" -v x="$x" 'BEGIN { printf "%.3f", s * x }')
    load "$R" || { rc=1; continue; }
    awk -v r="$R" -v x="$x" -v a="$(field p50_ttft_ms)" -v b="$(field p99_ttft_ms)" -v c="$(field p99_tpot_ms)" -v tp="$(field output_throughput)" \
        -v g="$(field goodput)" -v rf="$(field refused)" -v to="$(field timed_out)" -v l="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo null)" 'BEGIN {
        printf "{\"bench\":\"serve\",\"rate\":%s,\"saturation_share\":%s,\"p50_ttft_s\":%.4f,\"p99_ttft_s\":%.4f,\"p99_tpot_s\":%.4f,\"tokens_per_s\":%.2f,\"goodput\":%.4f,\"refused\":%d,\"timed_out\":%d,\"load1\":%s}\n", r, x, a / 1e3, b / 1e3, c / 1e3, tp, g, rf, to, l }'
done
kill -TERM $SPID 2>/dev/null
wait $SPID 2>/dev/null
trap - EXIT
exit $rc
