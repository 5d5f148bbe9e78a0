#!/bin/sh
# bench/bench_serve.sh [BUILD_DIR] - tools/ptserve under tools/ptload's load, JSON lines (make copies it to
# build/bench_serve, which finds build/ptserve, build/ptload and build/bench_serve_engine beside itself).
# The model (SERVE_GGUF): by default GPT-2 124M's shape (12 layers, width 768, 12 heads) with a byte vocabulary
# (85M parameters) in q8_0, random weights, as GGUF (bench_serve_engine export; kept in SERVE_DIR and reused).
# ptserve on a free loopback port, --threads SERVE_THREADS (2) --max-seqs SERVE_MAX_SEQS (8). Every request:
# a number of its own and SERVE_PROMPT (16) words of prompt (no two alike), max_tokens SERVE_OUTPUT (24), temperature 0.8, streamed, ignore_eos.
# 1. HTTP overhead, first: SERVE_OVERHEAD_REQUESTS (16) requests at once through ptserve (ptload --rate 10000)
#    vs the same requests submitted to pt_engine directly on the same file, same max_running, token budget
#    and threads (bench_serve_engine run); 3 runs each, interleaved, medians:
#    {"bench":"serve_overhead","http_tokens_per_s":..,"engine_tokens_per_s":..,"ratio":..,"load1":..} (target >= 0.9)
# 2. Latency vs rate: Poisson arrivals at SERVE_RATES (default "0.25 0.5 1 2 4") times the saturated request
#    rate found in 1 (http tokens/s / SERVE_OUTPUT), SERVE_REQUESTS (32) requests per rate, one ptload run each:
#    {"bench":"serve","server":"ptserve","rate":R,"p50_ttft_s":..,"p99_ttft_s":..,"p99_tpot_s":..,"tokens_per_s":..,"goodput":..,"refused":..}
#    goodput: requests/s with TTFT <= SERVE_SLO_TTFT (1 s) and TPOT <= 0.2 s.
# 3. The peer, when BENCH_LLAMA_SERVER names llama.cpp's llama-server binary (bench/peers/llama_server.sh says
#    how to build it): the same sweep (same absolute rates, same requests, same threads and sequences) on
#    llama-server serving the same GGUF file, lines with "server":"llama-server"; then
#    {"bench":"serve_slo","slo_p99_ttft_s":S,"ptserve_max_rate":..,"llama_server_max_rate":..,"ratio":..}:
#    the highest swept rate each sustains with p99 TTFT <= S and nothing refused or timed out (target ratio >= 1.0).
set -u
B=${1:-$(dirname "$0")}
HERE=$(cd "$(dirname "$0")" && pwd)
W=${SERVE_DIR:-${TMPDIR:-/tmp}/ptrain_bench_serve}
N=${SERVE_REQUESTS:-32}
NO=${SERVE_OVERHEAD_REQUESTS:-16}
P=${SERVE_PROMPT:-16}
O=${SERVE_OUTPUT:-24}
M=${SERVE_MAX_SEQS:-8}
T=${SERVE_THREADS:-2}
SLO=${SERVE_SLO_TTFT:-1.0}
CTX=1024
export OMP_WAIT_POLICY=passive
unset PTRAIN_PROGRESS
mkdir -p "$W"
MODEL=${SERVE_GGUF:-$W/gpt2-85m-bytes-q8_0.gguf}
if [ ! -s "$MODEL" ]; then
    [ -z "${SERVE_GGUF:-}" ] || { echo "bench serve: SERVE_GGUF=$MODEL: no such file" >&2; exit 1; }
    "$B/bench_serve_engine" export "$MODEL" && rm -rf "$MODEL.ckpt" || { echo "bench serve: cannot write the model $MODEL" >&2; exit 1; }
fi
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT

"$B/ptserve" --gguf "$MODEL" --port 0 --threads "$T" --max-seqs "$M" >"$W/ptserve.out" 2>"$W/ptserve.err" &
SPID=$!
PIDS="$SPID"
URL=""
t=0
while [ $t -lt 1200 ] && [ -z "$URL" ]; do
    URL=$(sed -n 's/^ptserve: listening on //p' "$W/ptserve.out" 2>/dev/null)
    [ -n "$URL" ] || { kill -0 $SPID 2>/dev/null || break; sleep 0.1; t=$((t + 1)); }
done
[ -n "$URL" ] || { echo "bench serve: ptserve did not start: $(head -c 600 "$W/ptserve.err")" >&2; exit 1; }
URL=${URL%/}

# load URL RATE REQUESTS SEED: one ptload run, its JSON line in $W/load.json (the seed makes its prompts
# unique: no prefix-cache hits from an earlier run)
load() {
    "$B/ptload" --url "$1" --rate "$2" --requests "$3" --seed "$4" --prompt-len "$P" --output-len "$O" --ignore-eos --slo-ttft "$SLO" --timeout 300 >"$W/load.out" 2>"$W/load.err"
    r=$?
    grep '^{' "$W/load.out" | tail -n 1 >"$W/load.json"
    [ $r -eq 0 ] && [ -s "$W/load.json" ] && return 0
    echo "bench serve: ptload --url $1 --rate $2 exit $r: $(tail -n 3 "$W/load.err") $(sed -n 2p "$W/load.out")" >&2
    for p in $PIDS; do kill -0 "$p" 2>/dev/null || echo "bench serve: the server (pid $p) is gone: $(tail -n 3 "$W/ptserve.err" "$W/llama-server.log" 2>/dev/null)" >&2; done
    return 1
}
# field NAME: a number of $W/load.json
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p" "$W/load.json"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
load1() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo null; }

rc=0
hs="" es=""
load "$URL" 10000 4 99 >/dev/null 2>&1 # a warm-up (the weights' pages, the threads)
for rep in 1 2 3; do
    e=$("$B/bench_serve_engine" run "$MODEL" "$NO" "$P" "$O" "$M" "$T" "$rep" | sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/\1/p')
    if [ -n "$e" ]; then es="$es $e"; else echo "bench serve: bench_serve_engine failed" >&2; rc=1; fi
    if load "$URL" 10000 "$NO" "$rep"; then hs="$hs $(field output_throughput)"; else rc=1; fi
done
http=$(echo "$hs" | median) eng=$(echo "$es" | median)
awk -v h="$http" -v e="$eng" -v n="$NO" -v p="$P" -v o="$O" -v m="$M" -v t="$T" -v l="$(load1)" -v hs="$hs" -v es="$es" 'BEGIN {
    gsub(/^ /, "", hs); gsub(/ /, ",", hs); gsub(/^ /, "", es); gsub(/ /, ",", es)
    printf "{\"bench\":\"serve_overhead\",\"requests\":%d,\"prompt_words\":%d,\"output_tokens\":%d,\"max_seqs\":%d,\"threads\":%d,\"http_tokens_per_s\":%.2f,\"engine_tokens_per_s\":%.2f,\"ratio\":%.3f,\"http_runs\":[%s],\"engine_runs\":[%s],\"load1\":%s}\n", n, p, o, m, t, h, e, (e > 0 ? h / e : 0), hs, es, l }'

sat=$(awk -v h="$http" -v o="$O" 'BEGIN { printf "%.4f", h / o }')
RATES=""
for x in ${SERVE_RATES:-0.25 0.5 1 2 4}; do RATES="$RATES $(awk -v s="$sat" -v x="$x" 'BEGIN { printf "%.3f", s * x }')"; done

# sweep NAME URL: one line per rate; the highest rate meeting the SLO in $W/NAME.max
sweep() {
    best=0 seed=10
    for R in $RATES; do
        seed=$((seed + 1))
        load "$2" "$R" "$N" "$seed" || { rc=1; continue; }
        awk -v s="$1" -v r="$R" -v sat="$sat" -v a="$(field p50_ttft_ms)" -v b="$(field p99_ttft_ms)" -v c="$(field p99_tpot_ms)" -v tp="$(field output_throughput)" \
            -v rt="$(field request_throughput)" -v g="$(field goodput)" -v rf="$(field refused)" -v to="$(field timed_out)" -v fl="$(field failed)" -v l="$(load1)" 'BEGIN {
            printf "{\"bench\":\"serve\",\"server\":\"%s\",\"rate\":%s,\"saturation_share\":%.3f,\"p50_ttft_s\":%.4f,\"p99_ttft_s\":%.4f,\"p99_tpot_s\":%.4f,\"tokens_per_s\":%.2f,\"requests_per_s\":%.3f,\"goodput\":%.4f,\"refused\":%d,\"timed_out\":%d,\"failed\":%d,\"load1\":%s}\n", s, r, r / sat, a / 1e3, b / 1e3, c / 1e3, tp, rt, g, rf, to, fl, l }'
        ok=$(awk -v b="$(field p99_ttft_ms)" -v s="$SLO" -v rf="$(field refused)" -v to="$(field timed_out)" -v fl="$(field failed)" 'BEGIN { print (b / 1e3 <= s && rf + to + fl == 0) ? 1 : 0 }')
        [ "$ok" = 1 ] && best=$R
    done
    echo "$best" >"$W/$1.max"
}
sweep ptserve "$URL"
kill -TERM $SPID 2>/dev/null
wait $SPID 2>/dev/null
PIDS=""

if [ -n "${BENCH_LLAMA_SERVER:-}" ]; then
    PEER=$HERE/peers/llama_server.sh # beside this script in bench/, or bench/peers from the repository root (make bench)
    [ -f "$PEER" ] || PEER=bench/peers/llama_server.sh
    if out=$(sh "$PEER" "$BENCH_LLAMA_SERVER" "$MODEL" "$T" "$M" "$CTX" "$W/llama-server.log"); then
        LURL=${out% *} LPID=${out#* }
        PIDS="$LPID"
        load "$LURL" 10000 4 99 >/dev/null 2>&1
        sweep llama-server "$LURL"
        kill -TERM "$LPID" 2>/dev/null
        wait "$LPID" 2>/dev/null
        PIDS=""
        awk -v s="$SLO" -v a="$(cat "$W/ptserve.max")" -v b="$(cat "$W/llama-server.max")" -v top="${RATES##* }" 'BEGIN {
            printf "{\"bench\":\"serve_slo\",\"slo_p99_ttft_s\":%s,\"ptserve_max_rate\":%s,\"llama_server_max_rate\":%s,\"ratio\":%s,\"note\":\"the highest swept rate under the SLO; at the top rate %s it is a lower bound\"}\n", s, a, b, (b > 0 ? sprintf("%.3f", a / b) : "null"), top }'
    else
        rc=1
    fi
fi
trap - EXIT
exit $rc
