#!/bin/sh
# bench/serve_large.sh - a model no single rank holds: GPT-2 large's shape (36 layers, width 1280, 20 heads,
# a 50,257-token vocabulary, context 1024: 774M parameters, 2.9 GiB in f32) with its deterministic
# initialization, saved as a checkpoint once (build/make_gpt_ckpt, kept in LARGE_CKPT), then served by
# ptserve --tp 2 --pp 2 under mpirun -np 4 (1 thread a rank): every rank loads its quarter of the layers
# and heads. Prints JSON lines: the model ("infer_large_model"), each rank's place and memory as ptserve
# reports it at startup (pt_gpt_weights_bytes, pt_mem of its model's context, its KV pool, its resident
# bytes; "share" = its weights over the whole model's), and one greedy completion through HTTP
# ("infer_large_answer": tokens, seconds). A machine without MPI prints a line saying why.
# Env: LARGE_CKPT (build/bench_gpt2_large), LARGE_TOKENIZER (build/bench_bpe_50001.bin: a 50,257-token BPE;
# bench/run.sh's decode block makes it), LARGE_TOKENS (16), LARGE_LAYOUT ("--tp 2 --pp 2"), LARGE_NP (4).
set -u
cd "$(dirname "$0")/.." || exit 1
CK=${LARGE_CKPT:-build/bench_gpt2_large}
TOK=${LARGE_TOKENIZER:-build/bench_bpe_50001.bin}
LAY=${LARGE_LAYOUT:---tp 2 --pp 2}
NP=${LARGE_NP:-4}
NT=${LARGE_TOKENS:-16}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say() { printf '{"bench":"infer_large","error":"%s"}\n' "$1"; exit 0; }
command -v mpirun >/dev/null 2>&1 || say "not run: no mpirun (make deps)"
make -s build/ptserve build/make_gpt_ckpt >/dev/null 2>&1 || say "not run: make build/ptserve build/make_gpt_ckpt failed"
[ -f "$TOK" ] || say "not run: no tokenizer $TOK (BENCH=decode makes it; or LARGE_TOKENIZER=FILE)"
out=${TMPDIR:-/tmp}/ptrain_serve_large.$$
if [ ! -f "$CK/latest" ]; then
    rm -rf "$CK"
    ./build/make_gpt_ckpt "$CK" 36 1280 20 50257 1024 "$TOK" >"$out.model" || say "not run: make_gpt_ckpt failed"
    sed 's/"bench":"make_gpt_ckpt"/"bench":"infer_large_model"/' "$out.model" >"$CK.json"
fi
cat "$CK.json"
total=$(sed -n 's/.*"weights_bytes":\([0-9]*\).*/\1/p' "$CK.json")
t0=$(date +%s)
# shellcheck disable=SC2086 # $LAY: the layout's flags
timeout 900 mpirun --oversubscribe -np "$NP" ./build/ptserve --ckpt "$CK" --port 0 --threads 1 $LAY --max-seqs 2 --kv-blocks 64 >"$out" 2>"$out.err" &
MP=$!
URL=""
while [ -z "$URL" ] && kill -0 $MP 2>/dev/null; do URL=$(sed -n 's/^ptserve: listening on //p' "$out" 2>/dev/null); sleep 1; done
[ -n "$URL" ] || { kill $MP 2>/dev/null; say "ptserve did not start: $(tail -c 300 "$out.err" | tr '\n"' '  ')"; }
up=$(($(date +%s) - t0))

awk -v lay="$LAY" -v up="$up" -v total="${total:-1}" '/^ptserve: rank [0-9]+ \(tp / {
        gsub(/[(),:]/, " ")
        for (i = 1; i <= NF; i++) {
            if ($i == "rank") r = $(i + 1)
            if ($i == "tp") tp = $(i + 1)
            if ($i == "pp") pp = $(i + 1)
            if ($i == "layers") ly = $(i + 1)
            if ($i == "heads") hd = $(i - 1)
            if ($i == "weights") wm = $(i + 1)
            if ($i == "pt_mem") pm = $(i + 1)
            if ($i == "cache") kv = $(i + 1)
            if ($i == "resident") rs = $(i + 1)
        }
        printf "{\"bench\":\"infer_large\",\"layout\":\"%s\",\"rank\":%d,\"tp\":%d,\"pp\":%d,\"layers\":\"%s\",\"heads\":%d,\"weights_mib\":%.1f,\"pt_mem_params_mib\":%.1f,\"kv_mib\":%.1f,\"resident_mib\":%.1f,\"share\":%.3f,\"startup_s\":%d}\n", lay, r, tp, pp, ly, hd, wm, pm, kv, rs, wm / (total / 1048576), up
    }' "$out"
s=$(date +%s.%N)
ans=$(curl -s -d "{\"prompt\":\"The meaning of\",\"max_tokens\":$NT,\"temperature\":0}" "${URL}v1/completions")
e=$(date +%s.%N)
n=$(echo "$ans" | sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p')
printf '{"bench":"infer_large_answer","layout":"%s","tokens":%s,"seconds":%.2f}\n' "$LAY" "${n:-0}" "$(echo "$e - $s" | bc)"
P0=$(sed -n 's/.*pids 0:\([0-9]*\) .*/\1/p' "$out")
[ -n "$P0" ] && kill -TERM "$P0"
wait $MP
rm -f "$out" "$out.err" "$out.model"
