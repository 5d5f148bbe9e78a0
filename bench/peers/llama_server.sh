#!/bin/sh
# bench/peers/llama_server.sh LLAMA_SERVER GGUF THREADS SLOTS CONTEXT LOG
# The serve bench's peer (bench/bench_serve.sh, when BENCH_LLAMA_SERVER names the binary): llama.cpp's own
# llama-server on loopback, set up as tools/ptserve is in the bench: THREADS threads for decode and prompts,
# SLOTS parallel sequences (continuous batching, its default), CONTEXT tokens of KV cache per sequence,
# a batch of 256 tokens per step (ptserve's token budget). Logs to LOG. Waits until GET /health answers
# 200 (at most 120 s), then prints "URL PID" and returns; the caller stops PID. Exit 1 if it did not start.
#
# Building llama-server (about 25 minutes on 2 cores; a scratch folder, never the product's tree):
#   pip download --no-deps --no-binary :all: llama-cpp-python -d /tmp/lldl
#   tar xzf /tmp/lldl/llama_cpp_python-*.tar.gz -C /tmp && cd /tmp/llama_cpp_python-*/vendor/llama.cpp
#   cmake -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
#   cmake --build build --target llama-server -j2      # -> build/bin/llama-server
set -u
[ $# -eq 6 ] || { echo "usage: llama_server.sh LLAMA_SERVER GGUF THREADS SLOTS CONTEXT LOG" >&2; exit 2; }
BIN=$1 GGUF=$2 T=$3 S=$4 C=$5 LOG=$6
[ -x "$BIN" ] || { echo "llama_server.sh: $BIN is not an executable (BENCH_LLAMA_SERVER)" >&2; exit 1; }
[ -s "$GGUF" ] || { echo "llama_server.sh: no model $GGUF" >&2; exit 1; }
# a free loopback port: the first of a few candidates nothing answers on
port=""
for p in $(( 20000 + $$ % 20000 )) $(( 21000 + $$ % 19000 )) $(( 23000 + $$ % 17000 )); do
    if ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$p/"; then port=$p; break; fi
done
[ -n "$port" ] || { echo "llama_server.sh: no free port" >&2; exit 1; }
"$BIN" -m "$GGUF" --host 127.0.0.1 --port "$port" -t "$T" -tb "$T" -np "$S" -c $((S * C)) -b 256 -ub 256 >"$LOG" 2>&1 &
pid=$!
i=0
while [ $i -lt 1200 ]; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/health" 2>/dev/null)
    [ "$code" = 200 ] && { echo "http://127.0.0.1:$port $pid"; exit 0; }
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
kill $pid 2>/dev/null
echo "llama_server.sh: llama-server did not start: $(tail -n 5 "$LOG")" >&2
exit 1
