#!/bin/sh
# bench/run.sh - runs ptrain.h's benchmarks by name, each configuration in its own process. Their JSON
# lines go to stdout as each program prints them; messages go to stderr.
# Usage: [BENCH=name[,name...]] sh bench/run.sh [--list | --needs] [bench [bench_dist [bench_pp [bench_cl [ptcl [bench_data]]]]]]
#   BENCH    the benchmarks to run, in the order given (commas or spaces between names; a name given twice
#            runs once). Unset, empty or "all": every one, in the order of --list. "list": the same as --list.
#            An unknown name is an error (exit 2, nothing run) that names it and lists the valid ones.
#   --list   prints the names, one per line, each with what it measures
#   --needs  prints the programs the selection needs (file names in BENCH_BUILD), one per line: the
#            Makefile builds only those
# Programs: in BENCH_BUILD (default build); each path can be set on its own by BENCH_BIN (bench),
# BENCH_DIST, BENCH_PP, BENCH_CL, BENCH_PTCL, BENCH_DATA, BENCH_CKPT, BENCH_XENT, BENCH_RECOMPUTE, BENCH_ZERO,
# BENCH_LARGEST, BENCH_QMM, BENCH_DECODE, BENCH_ENGINE, BENCH_RECOVERY, BENCH_SERVE, BENCH_SPEC, BENCH_INFER_LAYOUT, BENCH_OMP, BENCH_DECODE_OMP (the OpenMP
# builds of bench and bench_decode: -DPTRAIN_OPENMP -fopenmp), or by the arguments above. LARGEST_BUDGET_GIB (default 22): the memory the largest_model bench may fill.
# MPIRUN (default mpirun) starts dist and pp on 2 ranks. CL_TUNE (default BENCH_BUILD/ptrain_cl_tune.txt)
# is the file `ptcl tune` writes for CLBlast's GEMM; it is searched for once, when it is missing and
# cl_gemm or cl_gpt is selected (a few minutes; delete it to search again).
# A benchmark whose program is missing (not built) or exits non-zero is reported on stderr as
# "bench NAME: FAILED (...)" and the others still run; one that cannot run on this machine (no mpirun,
# no OpenCL device) is reported as skipped. The last stderr line sums up; exit 1 when any failed.
#
# dist: bench_dist (data parallelism, built with mpicc) runs under mpirun -np 2, once with Open MPI's
# default choice of non-blocking allreduce algorithm and once with the ring
# (coll_libnbc_iallreduce_algorithm=1), since pt_dp's buckets go through MPI_Iallreduce, whose default is
# slower than the blocking MPI_Allreduce it is compared with on some machines.
# OpenBLAS is measured with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, so it picks its own best kernel
# for this CPU (some machines set them to work around old OpenBLAS bugs, which slows it). The OpenCL
# benchmarks run with PTRAIN_CL_TUNE unset, and set to CL_TUNE for their tuned runs.
set -u

# name, programs it needs (comma-separated), what it measures
units() {
    cat <<'EOF'
gemm bench SGEMM n=1024 through ptrain vs OpenBLAS, all four transpose cases
gemm_bf16 bench bf16 GEMM (fp32 accumulation) vs ptrain's SGEMM at the GPT config C layer shapes, 1 and 2 threads
gpt bench GPT training step on the CPU, configs A, B and C
precision bench GPT training step in bf16 and fp16 mixed precision vs f32 (interleaved, same init), configs A, B and C
monitor bench the monitor's overhead on config A (5 interleaved pairs of 20-step runs without and with it)
data bench_data token loader: tokens/s with and without the prefetch thread, data wait per batch
ckpt bench_ckpt checkpoints: CRC32C speed, synchronous and asynchronous saves vs a plain fsynced write, resume
xent bench_xent config C with the LM head and loss fused in chunks of 64 rows vs unfused: step and head time, activation bytes
dist bench_dist data parallelism on 2 MPI ranks: bucketed allreduce, overlap with backward, ZeRO; both iallreduce algorithms
pp bench_pp pipeline bubbles on 2 MPI ranks (GPipe, 1F1B, interleaved): measured vs simulated with measured times
cl_gemm bench_cl,ptcl OpenCL GEMM through ptrain vs a direct CLBlast call, untuned, then tuned with CL_TUNE
cl_bandwidth bench_cl OpenCL elementwise bandwidth vs the device's copy
cl_gpt bench_cl,ptcl GPT training step (config A) on OpenCL, tuned with CL_TUNE
recompute bench_recompute activation recomputation none/selective/full: activation bytes and step time, 12 layers, width 768, T=1024
zero bench_zero ZeRO-0..3 at dp 2 and dp 4 (config B): model state per rank apart from transient buffers, step time, exposed gathers; FSDP2 alongside with BENCH_TORCH
largest_model bench_largest the largest GPT-2 shape that trains 10 steps on 4 ranks within 22 GiB: f32 ZeRO-0 vs bf16 ZeRO-3 full recompute, total RSS (about 10 minutes)
qmm bench_qmm the inference matrix kernel pt__qmm (f32 f16 bf16 q8_0 q4_0; 3072 x 768 and 768 x 3072; M = 1, 4, 16, 256; 2 threads): GB/s of weights, GFLOP/s
recovery bench_recovery the supervisor (build/ptrun) on the tutorial GPT, 4 ranks: detection, teardown and recovery time and steps lost per fault kind
decode bench_decode KV-cached decode tokens/s at batch 1, 4, 16 and prefill tokens/s in f32, bf16, q8_0, q4_0, two GPT-2 shapes; llama.cpp on the same GGUF with BENCH_LLAMA_BENCH (llama-bench) or BENCH_LLAMA, DECODE_ROUNDS interleaved; the batch-1 step's profile per model (decode_profile)
kv bench_engine the paged KV cache: requests running at once in a fixed budget, paged vs contiguous; a shared 512-token prefix's savings; the prefix-cache hit rate of a multi-turn chat; the q8_0 cache vs f32 and f16 in one byte budget (requests held, decode tokens/s at context 768)
engine bench_engine the serving engine on GPT-2 124M in q8_0: Poisson arrivals, continuous vs request-level batching, the highest rate under an SLO of 5x the unloaded p99 TTFT; priority under overload
serve bench_serve tools/ptserve over HTTP under tools/ptload (GPT-2 124M shape, byte vocabulary, q8_0): TTFT/TPOT/goodput at 5 Poisson rates from 0.25x to 4x saturation; HTTP vs the engine driven directly; llama-server (BENCH_LLAMA_SERVER) at the same rates
threads bench,bench_omp,bench_decode,bench_decode_omp the thread team vs OpenMP (-DPTRAIN_OPENMP builds): config A's training step and batch-1 q8_0 decode on 2 threads, quiet and beside a 1-core busy loop
spec bench_spec speculative decoding, batch 1: tokens/s with prompt lookup over without on an input whose answer quotes the prompt and on one with nothing to look up (gpt2-85m-bytes, q8_0); a 2-layer draft of the 124M shape; acceptance
infer_layout bench_infer_layout model-parallel decode (GPT-2 124M shape, f32 and q8_0, batch 1 and 16) on tp2, pp2 and tp2 x pp2 against one process of 2 threads: tokens/s, vs_one, communication share; the 768-float TP sum vs MPI_Allreduce and a Sendrecv exchange
serve_layout bench_serve_layout ptserve --tp 2 and --pp 2 under mpirun against ptserve on one process of 2 threads, GPT-2 124M shape in q8_0, at one saturating rate of ptload (batch 16): output tokens/s, TPOT, TTFT, vs_one
infer_large bench_infer_large a model no rank holds: GPT-2 large's shape (774M, f32) served by ptserve --tp 2 --pp 2 on 4 ranks: each rank's layers, heads, weights, pt_mem, KV and resident bytes; a completion through HTTP
EOF
}
ALL=$(units | cut -d' ' -f1)

list() { units | while read -r n _ d; do printf '%-13s %s\n' "$n" "$d"; done; }

MODE=run
case ${1:-} in
--list) MODE=list; shift ;;
--needs) MODE=needs; shift ;;
esac

# the selection, checked against the names
SEL=""
bad=""
listed=""
for n in $(echo "${BENCH:-all}" | tr ',' ' '); do
    case $n in
    all) add=$ALL ;;
    list) listed=yes add="" ;;
    *) if echo "$ALL" | grep -qxF -- "$n"; then add=$n; else bad="$bad $n"; add=""; fi ;;
    esac
    for a in $add; do case " $SEL " in *" $a "*) ;; *) SEL="$SEL $a" ;; esac; done
done
if [ -n "$bad" ]; then
    echo "bench/run.sh: unknown benchmark name(s):$bad; the valid names:" >&2
    list >&2
    exit 2
fi
if [ -n "$listed" ]; then
    # BENCH=list: nothing to build, nothing to run
    [ "$MODE" = needs ] || MODE=list
    SEL=""
fi
if [ "$MODE" = list ]; then list; exit 0; fi
[ -n "$SEL" ] || [ -n "$listed" ] || SEL=$ALL
if [ "$MODE" = needs ]; then
    for n in $SEL; do units | grep "^$n " | cut -d' ' -f2 | tr ',' '\n'; done | awk '!seen[$0]++'
    exit 0
fi

B=${BENCH_BUILD:-build}
BIN=${1:-${BENCH_BIN:-$B/bench}}
DIST=${2:-${BENCH_DIST:-$B/bench_dist}}
PP=${3:-${BENCH_PP:-$B/bench_pp}}
CL=${4:-${BENCH_CL:-$B/bench_cl}}
PTCL=${5:-${BENCH_PTCL:-$B/ptcl}}
DATA=${6:-${BENCH_DATA:-$B/bench_data}}
CKPT=${BENCH_CKPT:-$B/bench_ckpt}
XENT=${BENCH_XENT:-$B/bench_xent}
RECOMPUTE=${BENCH_RECOMPUTE:-$B/bench_recompute}
ZERO=${BENCH_ZERO:-$B/bench_zero}
LARGEST=${BENCH_LARGEST:-$B/bench_largest}
QMM=${BENCH_QMM:-$B/bench_qmm}
DECODE=${BENCH_DECODE:-$B/bench_decode}
ENGINE=${BENCH_ENGINE:-$B/bench_engine}
SPEC=${BENCH_SPEC:-$B/bench_spec}
INFER_LAYOUT=${BENCH_INFER_LAYOUT:-$B/bench_infer_layout}
SERVE_LAYOUT=${BENCH_SERVE_LAYOUT:-$B/bench_serve_layout} # bench/serve_layout.sh, beside build/ptserve, build/ptload, build/make_gpt_ckpt
INFER_LARGE=${BENCH_INFER_LARGE:-$B/bench_infer_large}    # bench/serve_large.sh, beside build/ptserve and build/make_gpt_ckpt
BIN_OMP=${BENCH_OMP:-$B/bench_omp}
DECODE_OMP=${BENCH_DECODE_OMP:-$B/bench_decode_omp}
RECOVERY=${BENCH_RECOVERY:-$B/bench_recovery} # bench/bench_recovery.sh, beside build/ptrun and build/pttrain-hooks
SERVE=${BENCH_SERVE:-$B/bench_serve} # bench/bench_serve.sh, beside build/ptserve, build/ptload and build/bench_serve_engine
# BENCH_LLAMA: a python with llama-cpp-python (a scratch venv: pip install llama-cpp-python builds llama.cpp, 20-25
# minutes here): the decode bench then runs llama.cpp (bench/peers/llama_decode.py) on the same model, exported by
# ptrain as GGUF, after each of ptrain's formats, and prints decode_peer lines and decode_vs_llama ratios
LLAMA=${BENCH_LLAMA:-}
# BENCH_LLAMA_BENCH: llama.cpp's own C benchmark, llama-bench (a build of llama.cpp: build/bin/llama-bench): the decode
# bench then runs it instead of BENCH_LLAMA (preferred when both are set), with the same decode_peer lines
LLAMA_BENCH=${BENCH_LLAMA_BENCH:-}
# BENCH_TORCH: a python with PyTorch (e.g. ../shared/peers/torchpy.sh of a scratch venv): the zero bench then runs
# the FSDP2 peer (bench/peers/fsdp2_gpt.py) after each DP size and prints zero_vs_fsdp2 (tokens/s, ZeRO-3 / FSDP2)
TORCH=${BENCH_TORCH:-}
CL_TUNE=${CL_TUNE:-$B/ptrain_cl_tune.txt}
MPIRUN=${MPIRUN:-mpirun} # split into words: it may carry options
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE PTRAIN_CL_TUNE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# in a benchmark: why it failed (the first failure) or why it was skipped
why=""
skip=""
# step CMD...: one process of the current benchmark; the others still run when it fails
step() {
    "$@"
    rc=$?
    [ "$rc" -eq 0 ] || [ -n "$why" ] || why="exit $rc: $*"
}
# built PROG: true when the program is there, else the benchmark fails
built() { [ -x "$1" ] || { why="$1 missing: not built"; return 1; }; }
# mpi PROG: the program is there and mpirun can start it
mpi() { built "$1" && { command -v "${MPIRUN%% *}" >/dev/null 2>&1 || { skip="$MPIRUN not found"; return 1; }; }; }
CL_OK=""
opencl() {
    built "$CL" || return 1
    [ -n "$CL_OK" ] || { if "$CL" probe >/dev/null 2>&1; then CL_OK=yes; else CL_OK=no; fi; }
    [ "$CL_OK" = yes ] || { skip="no OpenCL device: make deps installs pocl-opencl-icd; ptcl list shows the devices"; return 1; }
}
# tune: writes CL_TUNE with `ptcl tune` when it is missing; true when it is there
tune() {
    if [ ! -f "$CL_TUNE" ]; then
        if [ -x "$PTCL" ]; then
            echo "bench $1: tuning CLBlast's GEMM for this device into $CL_TUNE (ptcl tune, a few minutes)" >&2
            "$PTCL" tune -n 512 -t 300 -o "$CL_TUNE" >&2 || rm -f "$CL_TUNE"
        fi
        [ -f "$CL_TUNE" ] || echo "bench $1: no tuned run (no $CL_TUNE; $PTCL missing or its tuning failed)" >&2
    fi
    [ -f "$CL_TUNE" ]
}

b_gemm() { built "$BIN" && step "$BIN" gemm 1024; }
b_gemm_bf16() { built "$BIN" && step "$BIN" gemm_bf16; }
b_gpt() { built "$BIN" && for c in A B C; do step "$BIN" gpt $c 5; done; }
b_precision() { built "$BIN" && for c in A B C; do step "$BIN" precision $c 3 3; done; }
b_monitor() { built "$BIN" && step "$BIN" monitor A 5 20; }
b_data() { built "$DATA" && step "$DATA"; }
b_ckpt() { built "$CKPT" && step "$CKPT" A "$B/bench_ckpt_dir"; }
b_xent() { built "$XENT" && step "$XENT" C 5 64; }
# shellcheck disable=SC2086 # $MPIRUN
b_dist() {
    mpi "$DIST" || return
    step $MPIRUN -np 2 "$DIST"
    step env OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 $MPIRUN -np 2 -x OMPI_MCA_coll_libnbc_iallreduce_algorithm "$DIST"
}
# shellcheck disable=SC2086
b_pp() { mpi "$PP" && step $MPIRUN -np 2 "$PP"; }
b_cl_gemm() {
    opencl || return
    step "$CL" gemm 1024
    tune cl_gemm && step env PTRAIN_CL_TUNE="$CL_TUNE" "$CL" gemm 1024
}
b_cl_bandwidth() { opencl && step "$CL" bandwidth; }
b_recompute() { built "$RECOMPUTE" && step "$RECOMPUTE" L12 3; }
# tokens_per_s of the line of FILE matching PATTERN (the first)
tps() { grep "$2" "$1" | head -n 1 | sed -n 's/.*"tokens_per_s": *\([0-9.]*\).*/\1/p'; }
# shellcheck disable=SC2086 # $MPIRUN, $TORCH
b_zero() {
    mpi "$ZERO" || return
    out=${TMPDIR:-/tmp}/ptrain_bench_zero.$$
    for np in 2 4; do
        step $MPIRUN --oversubscribe -np $np "$ZERO" B 5 >"$out"
        cat "$out"
        if [ -n "$TORCH" ]; then
            OMP_NUM_THREADS=1 $TORCH -m torch.distributed.run --nproc-per-node $np bench/peers/fsdp2_gpt.py B 5 2>/dev/null | grep '^{' >>"$out"
            tail -n +5 "$out"
            a=$(tps "$out" '"stage":3') b=$(tps "$out" '"peer"')
            if [ -n "$a" ] && [ -n "$b" ]; then
                awk -v a="$a" -v b="$b" -v n="$np" 'BEGIN { printf "{\"bench\":\"zero_vs_fsdp2\",\"config\":\"B\",\"dp\":%d,\"zero3_tokens_per_s\":%s,\"fsdp2_tokens_per_s\":%s,\"ratio\":%.3f}\n", n, a, b, a / b }'
            else echo "bench zero: no FSDP2 line at dp $np (BENCH_TORCH=$TORCH)" >&2; fi
        fi
    done
    rm -f "$out"
}
# before (f32, ZeRO-0, no recomputation), then after (bf16, ZeRO-3, full recomputation): each picks the largest
# GPT-2 shape predicted to fit the budget on 4 ranks, trains it 10 steps and reports the ranks' total peak RSS
b_largest_model() {
    mpi "$LARGEST" || return
    for mode in before after; do step $MPIRUN --oversubscribe -np 4 "$LARGEST" $mode auto 10 "${LARGEST_BUDGET_GIB:-22}"; done
}
b_qmm() { built "$QMM" && step "$QMM" 2; }
# kv: the block bookkeeping on a tiny model, then the q8_0 cache against f32 and f16 in one byte budget (requests held at
# once) and at decode over 4 x 768 cached tokens (a minute or two on 2 busy cores); engine: GPT-2 124M q8_0 in wall time, ENGINE_MAX_LEN (default 48),
# ENGINE_REQUESTS (20) and ENGINE_RATES (multiples of the unloaded service rate, default 1,2,3,4,6): about 6 minutes on 2 busy cores
b_kv() { built "$ENGINE" && step "$ENGINE" kv; }
b_engine() { built "$ENGINE" && step "$ENGINE" engine "${ENGINE_MAX_LEN:-48}" "${ENGINE_REQUESTS:-20}" "${ENGINE_RATES:-1,2,3,4,6}"; }
# spec: prompt lookup on SPEC_MODEL (gpt2-85m-bytes), then the 124M shape with its 2-layer draft; SPEC_FORMAT (q8_0),
# SPEC_TOKENS new tokens (128), SPEC_REPS interleaved pairs (3): a few minutes on 2 cores
b_spec() {
    built "$SPEC" || return
    step "$SPEC" lookup "${SPEC_MODEL:-gpt2-85m-bytes}" "${SPEC_FORMAT:-q8_0}" "${SPEC_TOKENS:-128}" "${SPEC_REPS:-3}"
    step "$SPEC" draft gpt2-124m "${SPEC_FORMAT:-q8_0}" "${SPEC_TOKENS:-128}" "${SPEC_REPS:-3}"
}
# recovery: one supervised run per fault kind (bench/bench_recovery.sh; RECOVERY_FAULTS narrows it)
b_recovery() { mpi "$RECOVERY" && step "$RECOVERY"; }
# serve: ptserve on loopback under ptload, and the same requests on the engine alone (bench/bench_serve.sh; SERVE_RATES,
# SERVE_REQUESTS, SERVE_OUTPUT... widen or narrow it): about 3 minutes on 2 busy cores; with BENCH_LLAMA_SERVER=llama.cpp's
# llama-server binary, the same sweep on it serving the same GGUF (bench/peers/llama_server.sh) and the rates under the SLO
b_serve() { built "$SERVE" && step "$SERVE"; }
# serve_layout: bench/serve_layout.sh (SLAYOUT_RATE, SLAYOUT_REQUESTS, SLAYOUT_LAYOUTS, SLAYOUT_ROUNDS): about 4 minutes
b_serve_layout() { mpi "$SERVE_LAYOUT" && step "$SERVE_LAYOUT"; }
# infer_large: bench/serve_large.sh (the 2.9 GiB checkpoint made once, about a minute; LARGE_CKPT, LARGE_LAYOUT, LARGE_NP)
b_infer_large() { mpi "$INFER_LARGE" && step "$INFER_LARGE"; }
# peer_error MODEL FORMAT WHY: the decode_peer line of a peer that did not run, on stdout (WHY escaped for JSON)
peer_error() {
    e=$(printf '%s' "$3" | tr -d '\000-\037' | cut -c1-400 | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
    printf '{"bench":"decode_peer","model":"%s","format":"%s","batch":1,"error":"%s"}\n' "$1" "$2" "$e"
}
# llama_bench_peer GGUF MODEL FORMAT: llama.cpp's own llama-bench (BENCH_LLAMA_BENCH) on GGUF, decode (-p 0 -n
# DECODE_TOKENS) then prefill (-p 256 -n 0), DECODE_REPS repetitions each, LLAMA_THREADS (default 2) threads, its jsonl
# turned into one decode_peer line on stdout (status 0); status 1 with the reason in $out.err when it fails
llama_bench_peer() {
    th=${LLAMA_THREADS:-2}
    "$LLAMA_BENCH" -m "$1" -t "$th" -p 0 -n "${DECODE_TOKENS:-64}" -r "${DECODE_REPS:-3}" -o jsonl >"$out.lb" 2>"$out.err" &&
        "$LLAMA_BENCH" -m "$1" -t "$th" -p 256 -n 0 -r "${DECODE_REPS:-3}" -o jsonl >>"$out.lb" 2>"$out.err" || return 1
    awk -v m="$2" -v f="$3" -v th="$th" -v r="${DECODE_REPS:-3}" '
        function val(k,   s) { if (!match($0, "\"" k "\": *\"?[-0-9A-Za-z_.+]*")) return ""; s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: *"?/, "", s); return s }
        /"avg_ts"/ { g = val("n_gen") + 0; p = val("n_prompt") + 0; ts = val("avg_ts")
                     if (g > 0 && p == 0) d = ts; else if (p > 0 && g == 0) pf = ts
                     if (bc == "") bc = val("build_commit") }
        END { if (d == "" || pf == "") { print "llama-bench printed no decode (n_prompt 0) and prefill (n_gen 0) results with avg_ts"; exit 1 }
              printf "{\"bench\":\"decode_peer\",\"peer\":\"llama-bench\",\"build\":\"%s\",\"model\":\"%s\",\"format\":\"%s\",\"batch\":1,\"tokens_per_s\":%.1f,\"prefill_tokens_per_s\":%.1f,\"threads\":%d,\"reps\":%d}\n", bc, m, f, d, pf, th, r }' \
        "$out.lb" >"$out.pl" || { cp "$out.pl" "$out.err"; return 1; }
    cat "$out.pl"
}
# decode: each model, each format: ptrain (bench_decode), then the llama.cpp peer on the same weights (the GGUF that
# bench_decode --gguf-out writes; the 124M model's is a 50,257-token byte-level BPE, DECODE_TOKENIZER, default
# BENCH_BUILD/bench_bpe_50001.bin: 50,001 merges trained once on the fortunes corpus, data/fortunes/train.txt, made by
# tools/prepare_text.sh when missing; GPT-2's own from `ptckpt import vocab.json merges.txt FILE` serves as well).
# The peer: BENCH_LLAMA_BENCH (llama.cpp's own C llama-bench: decode lines marked "peer":"llama-bench"), else
# BENCH_LLAMA (a python with llama-cpp-python: bench/peers/llama_decode.py); one that is not set, whose GGUF export
# fails or that fails prints a decode_peer line with "error" on stdout. DECODE_ROUNDS (default 1) rounds interleave the
# two (ptrain, peer, ptrain, peer, ...); each round's decode_vs_llama line (batch-1 tokens/s and prefill, ptrain over
# the peer) has "round", and with more than one round a last one has the medians over the rounds ("rounds": N).
# DECODE_MODELS / DECODE_FORMATS / DECODE_TOKENS / DECODE_REPS narrow or widen it; after each model's formats,
# `bench_decode MODEL --profile f32,q8_0,q4_0 32` (decode_profile lines; DECODE_PROFILE=0 skips it,
# DECODE_PROFILE_FORMATS / DECODE_PROFILE_TOKENS change it)
b_decode() {
    built "$DECODE" || return
    out=${TMPDIR:-/tmp}/ptrain_bench_decode.$$
    tok=${DECODE_TOKENIZER:-$B/bench_bpe_50001.bin}
    for model in ${DECODE_MODELS:-gpt2-85m-bytes gpt2-124m}; do
        for fmt in ${DECODE_FORMATS:-f32 bf16 q8_0 q4_0}; do
            peer="" # the peer's command for this format, once its GGUF is there
            g=${TMPDIR:-/tmp}/ptrain_bench_decode_$model.$fmt.gguf
            case $fmt in
            bf16) ;; # the peer runs f32, q8_0 and q4_0
            *)
                if [ -z "$LLAMA_BENCH" ] && [ -z "$LLAMA" ]; then
                    peer_error "$model" "$fmt" "not run: BENCH_LLAMA is not set (a python with llama-cpp-python), nor BENCH_LLAMA_BENCH (llama.cpp's llama-bench)"
                else
                    tk=""
                    if [ "$model" = gpt2-124m ]; then
                        tk="--tokenizer $tok"
                        # the tokenizer's corpus, the first time (the Debian fortunes; tools/prepare_text.sh says what is missing)
                        [ -f "$tok" ] || [ -f data/fortunes/train.txt ] || sh tools/prepare_text.sh data/fortunes >&2
                    fi
                    # shellcheck disable=SC2086 # $tk: two words or none
                    step "$DECODE" "$model" --gguf-out "$g" "$fmt" $tk 2>"$out.err"
                    grep '^bench_decode: trained' "$out.err" >&2 # the tokenizer made this time: how long it took
                    if [ "$rc" -ne 0 ]; then peer_error "$model" "$fmt" "not run: the GGUF export failed: $(grep . "$out.err" | tail -n 1)"
                    elif [ -n "$LLAMA_BENCH" ]; then peer=llama_bench_peer
                    else peer=python_peer; fi
                fi
                ;;
            esac
            : >"$out.vals"
            r=1
            while [ "$r" -le "${DECODE_ROUNDS:-1}" ]; do
                step "$DECODE" "$model" "$fmt" 1,4,16 "${DECODE_TOKENS:-64}" "${DECODE_REPS:-3}" >"$out"
                cat "$out"
                if [ -n "$peer" ]; then
                    if $peer "$g" "$model" "$fmt" >"$out.p"; then
                        cat "$out.p"
                        a=$(grep '"batch":1,' "$out" | grep -v decode_peer | head -n 1)
                        b=$(grep decode_peer "$out.p" | head -n 1)
                        # ptrain's and the peer's tokens/s and prefill tokens/s (0: not there)
                        for v in "$a:tokens_per_s" "$b:tokens_per_s" "$a:prefill_tokens_per_s" "$b:prefill_tokens_per_s"; do
                            x=$(echo "${v%:*}" | sed -n 's/.*[{,] *"'"${v##*:}"'": *\([0-9.]*\).*/\1/p')
                            printf '%s ' "${x:-0}"
                        done >>"$out.vals"
                        echo >>"$out.vals"
                        awk -v m="$model" -v f="$fmt" -v r="$r" 'END { if ($1 > 0 && $2 > 0) {
                            printf "{\"bench\":\"decode_vs_llama\",\"model\":\"%s\",\"format\":\"%s\",\"batch\":1,\"round\":%d,\"ptrain_tokens_per_s\":%s,\"llama_tokens_per_s\":%s,\"ratio\":%.3f", m, f, r, $1, $2, $1 / $2
                            if ($3 > 0 && $4 > 0) printf ",\"ptrain_prefill_tokens_per_s\":%s,\"llama_prefill_tokens_per_s\":%s,\"prefill_ratio\":%.3f", $3, $4, $3 / $4
                            printf "}\n" } }' "$out.vals"
                    else
                        peer_error "$model" "$fmt" "the llama.cpp peer ($(if [ "$peer" = llama_bench_peer ]; then echo "$LLAMA_BENCH"; else echo "$LLAMA"; fi)) failed on $g: $(grep . "$out.err" | tail -n 1)"
                        peer="" # not again in the next rounds
                    fi
                fi
                r=$((r + 1))
            done
            # the medians over the rounds (each column on its own)
            if [ "${DECODE_ROUNDS:-1}" -gt 1 ] && [ -s "$out.vals" ]; then
                for c in 1 2 3 4; do awk -v c="$c" '$c > 0 { print $c }' "$out.vals" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print 0 }'; done |
                    tr '\n' ' ' | awk -v m="$model" -v f="$fmt" -v n="$(wc -l <"$out.vals")" '{ if ($1 > 0 && $2 > 0) {
                        printf "{\"bench\":\"decode_vs_llama\",\"model\":\"%s\",\"format\":\"%s\",\"batch\":1,\"rounds\":%d,\"ptrain_tokens_per_s\":%s,\"llama_tokens_per_s\":%s,\"ratio\":%.3f", m, f, n, $1, $2, $1 / $2
                        if ($3 > 0 && $4 > 0) printf ",\"ptrain_prefill_tokens_per_s\":%s,\"llama_prefill_tokens_per_s\":%s,\"prefill_ratio\":%.3f", $3, $4, $3 / $4
                        printf "}\n" } }'
            fi
            rm -rf "$g" "$g.ckpt" "$out.err" "$out.p" "$out.lb" "$out.pl" "$out.vals"
        done
        # the batch-1 step's profile: time per matrix product against its bytes and a streaming read of them
        [ "${DECODE_PROFILE:-1}" = 0 ] || step "$DECODE" "$model" --profile "${DECODE_PROFILE_FORMATS:-f32,q8_0,q4_0}" "${DECODE_PROFILE_TOKENS:-32}"
    done
    rm -f "$out"
}
# python_peer GGUF MODEL FORMAT: llama-cpp-python (BENCH_LLAMA) on GGUF: its decode_peer line (bench/peers/llama_decode.py)
python_peer() { $LLAMA bench/peers/llama_decode.py "$1" "$2" "$3" "${DECODE_TOKENS:-64}" "${DECODE_REPS:-3}" 2>"$out.err"; }
# threads: the header's thread team against the OpenMP build (-DPTRAIN_OPENMP -fopenmp), 2 threads each, on
# config A's training step (5 steps) and batch-1 q8_0 decode (gpt2-85m-bytes, THREADS_TOKENS, default 32, new
# tokens, 3 reps), first on a quiet machine, then beside a busy loop on one core (sh -c 'while :; do :; done',
# what another process does to a shared machine). THREADS_ROUNDS (default 2) rounds, each running the four
# programs in turn; the best of the rounds is kept. The programs' own lines (gpt_train, decode), then one threads line per (what, impl, load) and one
# threads_ratio line per what: team / OpenMP quiet and busy (speed: > 1 the team is faster), busy / quiet
# per implementation (slowdown: step time or time per token, 1 = unaffected).
b_threads() {
    built "$BIN" && built "$BIN_OMP" && built "$DECODE" && built "$DECODE_OMP" || return
    out=${TMPDIR:-/tmp}/ptrain_bench_threads.$$
    : >"$out"
    for load in quiet busy; do
        spin=""
        if [ $load = busy ]; then
            sh -c 'while :; do :; done' &
            spin=$!
        fi
        r=0
        while [ $r -lt "${THREADS_ROUNDS:-2}" ]; do
            for impl in team openmp; do
                if [ $impl = team ]; then b=$BIN d=$DECODE; else b=$BIN_OMP d=$DECODE_OMP; fi
                step env PTRAIN_THREADS=2 OMP_NUM_THREADS=2 "$b" gpt A 5 >"$out.x"
                cat "$out.x" # the program's own lines too
                sed -n 's/.*"step_s":\([0-9.]*\).*/gpt_step_A '$impl' '$load' \1/p' "$out.x" >>"$out"
                step env PTRAIN_THREADS=2 OMP_NUM_THREADS=2 "$d" gpt2-85m-bytes q8_0 1 "${THREADS_TOKENS:-32}" 3 >"$out.x"
                cat "$out.x"
                sed -n 's/.*"tokens_per_s":\([0-9.]*\).*/decode_q8_0_b1 '$impl' '$load' \1/p' "$out.x" >>"$out"
            done
            r=$((r + 1))
        done
        [ -z "$spin" ] || { kill "$spin"; wait "$spin" 2>/dev/null; }
    done
    # gpt_step_A: seconds a step (lower is better); decode: tokens/s (higher is better); keep the best round
    awk '
        { k = $1 " " $2 " " $3; v = $4 + 0
          if (!(k in best) || ($1 ~ /^gpt/ ? v < best[k] : v > best[k])) best[k] = v }
        END {
            split("gpt_step_A decode_q8_0_b1", W, " ")
            for (w = 1; w <= 2; w++) {
                n = W[w]; t = (n ~ /^gpt/) # t: a time
                for (i = 0; i < 4; i++) {
                    impl = i < 2 ? "team" : "openmp"; load = i % 2 ? "busy" : "quiet"; k = n " " impl " " load
                    if (k in best) printf "{\"bench\":\"threads\",\"what\":\"%s\",\"impl\":\"%s\",\"load\":\"%s\",\"threads\":2,\"%s\":%.4f}\n", n, impl, load, t ? "step_s" : "tokens_per_s", best[k]
                }
                tq = best[n " team quiet"]; tb = best[n " team busy"]; oq = best[n " openmp quiet"]; ob = best[n " openmp busy"]
                if (tq > 0 && tb > 0 && oq > 0 && ob > 0)
                    printf "{\"bench\":\"threads_ratio\",\"what\":\"%s\",\"team_vs_openmp_quiet\":%.3f,\"team_vs_openmp_busy\":%.3f,\"team_busy_vs_quiet\":%.3f,\"openmp_busy_vs_quiet\":%.3f}\n",
                        n, t ? oq / tq : tq / oq, t ? ob / tb : tb / ob, t ? tb / tq : tq / tb, t ? ob / oq : oq / ob
            }
        }' "$out"
    rm -f "$out" "$out.x"
}
# infer_layout: bench_infer_layout (built with mpicc): the baseline, one process of 2 threads, then tp2 and pp2 (mpirun -np 2)
# and tp2 x pp2 (mpirun --oversubscribe -np 4), 1 thread a rank, each on INFER_LAYOUT_MODEL (gpt2-124m; tiny: a smoke run) in
# INFER_LAYOUT_FORMATS (f32,q8_0) at INFER_LAYOUT_BATCHES (1,16), INFER_LAYOUT_STEPS (16) timed decode steps;
# INFER_LAYOUT_PP_GROUPS (0: ptrain's default, pp) micro-batches of a pipelined step (see bench/bench_infer_layout.c); every line gets
# vs_one, its tokens/s over the baseline's at the same format and batch. Then the 768-float sum over 2 ranks
# three ways, INFER_LAYOUT_REPS (2000) calls each. About 2 minutes on 2 cores.
# shellcheck disable=SC2086 # $MPIRUN, $args
b_infer_layout() {
    mpi "$INFER_LAYOUT" || return
    out=${TMPDIR:-/tmp}/ptrain_bench_infer_layout.$$
    model=${INFER_LAYOUT_MODEL:-gpt2-124m}
    args="${INFER_LAYOUT_FORMATS:-f32,q8_0} ${INFER_LAYOUT_BATCHES:-1,16} ${INFER_LAYOUT_STEPS:-16}"
    export INFER_LAYOUT_PP_GROUPS=${INFER_LAYOUT_PP_GROUPS:-0}
    step "$INFER_LAYOUT" layout "$model" 1 1 2 $args >"$out.one"
    for l in one 2:1:2 1:2:2 2:2:4; do
        case $l in
        one) cp "$out.one" "$out" ;;
        *:4) step $MPIRUN --oversubscribe -np 4 -x INFER_LAYOUT_PP_GROUPS "$INFER_LAYOUT" layout "$model" ${l%%:*} 2 1 $args >"$out" ;;
        *) tp=${l%%:*} pp=${l#*:}; step $MPIRUN -np 2 -x INFER_LAYOUT_PP_GROUPS "$INFER_LAYOUT" layout "$model" $tp ${pp%%:*} 1 $args >"$out" ;;
        esac
        # vs_one after tokens_per_s: this line's tokens/s over the baseline line's of the same format and batch
        awk 'function val(k,   s) { if (!match($0, "\"" k "\":\"?[-0-9A-Za-z_.]*")) return ""; s = substr($0, RSTART, RLENGTH); sub(/^[^:]*:"?/, "", s); return s }
            NR == FNR { if (/"bench":"infer_layout"/) base[val("format") " " val("batch")] = val("tokens_per_s"); next }
            /"bench":"infer_layout"/ { b = base[val("format") " " val("batch")]
                if (b + 0 > 0) sub(/,"comm_share":/, sprintf(",\"vs_one\":%.3f,\"comm_share\":", val("tokens_per_s") / b)) }
            { print }' "$out.one" "$out"
    done
    step $MPIRUN -np 2 "$INFER_LAYOUT" allreduce 768 "${INFER_LAYOUT_REPS:-2000}"
    rm -f "$out" "$out.one"
}
b_cl_gpt() {
    opencl || return
    if tune cl_gpt; then step env PTRAIN_CL_TUNE="$CL_TUNE" "$CL" gpt A 3; else step "$CL" gpt A 3; fi
}

OK="" FAILED="" SKIPPED=""
for n in $SEL; do
    why="" skip=""
    t0=$(date +%s)
    "b_$n"
    if [ -n "$why" ]; then
        echo "bench $n: FAILED ($why)" >&2
        FAILED="$FAILED $n"
    elif [ -n "$skip" ]; then
        echo "bench $n: skipped ($skip)" >&2
        SKIPPED="$SKIPPED $n"
    else
        echo "bench $n: ok ($(($(date +%s) - t0)) s)" >&2
        OK="$OK $n"
    fi
done
# tally WORD NAME...: "N WORD (NAME...)"
tally() { w=$1; shift; echo "$# $w${1:+ ($*)}"; }
# shellcheck disable=SC2086
echo "bench: $(set -- $OK; echo $#) ok, $(tally failed $FAILED), $(tally skipped $SKIPPED)" >&2
[ -z "$FAILED" ]
