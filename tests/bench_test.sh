#!/bin/sh
# tests/bench_test.sh [BUILD_DIR] - bench/run.sh's selection by name, without running a real benchmark:
# every program it starts (bench, bench_data, bench_ckpt, bench_xent, bench_dist, bench_pp, bench_cl, ptcl, bench_recompute, bench_serve, bench_infer_layout, mpirun)
# is a small shell script in BUILD_DIR/bench_test that prints one JSON line naming itself and its
# arguments (FAKE_FAIL=PATTERN: the one whose "name args" matches exits 1). Checks the order of a full
# run, that only the selected names run, in the order given, that an unknown name fails before anything
# runs, that a failing or missing program is reported while the next benchmark still runs, when
# `ptcl tune` runs, that each line is written while its program still runs, --list and --needs; then the
# real programs it runs: bench_spec on its tiny model, bench_engine kvq8 at its smallest settings and
# bench_infer_layout (mpicc) on its tiny model through run.sh, their JSON lines' fields. Prints PASS/FAIL lines,
# then "N passed, N failed"; about 30 seconds (the builds).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build/tests}
T=$BUILD/bench_test
case $T in /*) ;; *) T=$(pwd)/$T ;; esac
rm -rf "$T" && mkdir -p "$T/bin" || exit 1
NP=0
NF=0
pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }

# the fake programs
cat >"$T/bin/fake" <<'EOF'
#!/bin/sh
n=$(basename "$0")${1:+ $*}
[ "$n" = "bench_cl probe" ] && exit "${FAKE_NO_CL:-0}"
if [ "${n%% *}" = ptcl ]; then
    while [ $# -gt 1 ] && [ "$1" != -o ]; do shift; done
    echo tuned >"$2"
    echo "{\"fake\":\"ptcl tune\"}"
    exit 0
fi
# FAKE_DECODE=1: a run of bench_decode (not --gguf-out, not --profile) prints a batch-1 decode line too
[ "${FAKE_DECODE:-}" = 1 ] && [ "${n%% *}" = bench_decode ] && [ "$2" != --gguf-out ] && [ "$2" != --profile ] &&
    echo "{\"bench\":\"decode\",\"model\":\"$1\",\"format\":\"$2\",\"batch\":1,\"tokens_per_s\":50.0,\"prefill_tokens_per_s\":450.0}"
echo "{\"fake\":\"$n\",\"tune\":\"${PTRAIN_CL_TUNE:+tuned}\",\"alg\":\"${OMPI_MCA_coll_libnbc_iallreduce_algorithm:-}\"}"
case $n in ${FAKE_FAIL:-}) exit 1 ;; esac
# FAKE_SEE=FILE: exit 1 unless the line just printed reaches FILE within 3 s (the output is not held back)
i=0
while [ -n "${FAKE_SEE:-}" ] && ! grep -q "\"fake\":\"$n\"" "$FAKE_SEE"; do
    i=$((i + 1))
    [ $i -le 30 ] || exit 1
    sleep 0.1 2>/dev/null || sleep 1
done
exit 0
EOF
for p in bench bench_data bench_ckpt bench_xent bench_dist bench_pp bench_cl ptcl bench_recompute bench_zero bench_largest bench_qmm bench_decode bench_engine bench_recovery bench_serve bench_omp bench_decode_omp bench_spec bench_infer_layout bench_serve_layout bench_infer_large; do cp "$T/bin/fake" "$T/bin/$p" && chmod +x "$T/bin/$p"; done
cat >"$T/bin/mpirun" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -np | -x) shift 2 ;; --oversubscribe) shift ;; *) break ;; esac; done
exec "$@"
EOF
chmod +x "$T/bin/mpirun"

# go SEL [VAR=VALUE...]: runs bench/run.sh with BENCH=SEL on the fakes; its stdout and stderr in $T/all
# (in the order written), the fakes' "name args" in $T/ran, its exit status in $RC
go() {
    sel=$1
    shift
    env BENCH="$sel" BENCH_BUILD="$T/bin" MPIRUN="$T/bin/mpirun" CL_TUNE="$T/tune.txt" "$@" sh bench/run.sh >"$T/all" 2>&1
    RC=$?
    sed -n 's/^{"fake":"\([^"]*\)".*/\1/p' "$T/all" >"$T/ran"
}
# ran DESC EXPECTED: the fakes that printed, in order, one a line
ran() {
    if [ "$(cat "$T/ran")" = "$2" ]; then pass "$1"; else fail "$1" "ran: $(tr '\n' ';' <"$T/ran") exit $RC"; fi
}
# has DESC PATTERN...: each pattern (grep -E) matches a line of $T/all
has() {
    d=$1
    shift
    for p in "$@"; do grep -Eq -- "$p" "$T/all" || { fail "$d" "no line matching '$p' in: $(tr '\n' ';' <"$T/all")"; return; }; done
    pass "$d"
}
# status DESC WANT: the exit status
status() { if [ "$RC" -eq "$2" ]; then pass "$1: exit $2"; else fail "$1" "exit $RC, not $2: $(tail -n 3 "$T/all" | tr '\n' ';')"; fi; }
# order DESC PATTERN...: the first lines matching the patterns come in that order
order() {
    d=$1 last=0
    shift
    for p in "$@"; do
        l=$(grep -En -- "$p" "$T/all" | head -n 1 | cut -d: -f1)
        if [ -z "$l" ] || [ "$l" -le "$last" ]; then fail "$d" "'$p' not after line $last: $(tr '\n' ';' <"$T/all")"; return; fi
        last=$l
    done
    pass "$d"
}

NAMES="gemm gemm_bf16 gpt precision monitor data ckpt xent dist pp cl_gemm cl_bandwidth cl_gpt recompute zero largest_model qmm recovery decode kv engine serve threads spec infer_layout serve_layout infer_large"

# --list and BENCH=list: every name once, with a description
out=$(sh bench/run.sh --list 2>&1)
if [ "$(echo "$out" | awk '{print $1}' | tr '\n' ' ')" = "$NAMES " ] && ! echo "$out" | awk 'NF < 3 {bad=1} END {exit !bad}'; then
    pass "--list: $NAMES, each with a description"
else
    fail "--list" "$out"
fi
if [ "$(BENCH=list sh bench/run.sh 2>&1)" = "$out" ]; then pass "BENCH=list is --list"; else fail "BENCH=list" "differs from --list"; fi

# everything, in the order of --list; ptcl tune once (no tune file yet) between the untuned and tuned GEMM
go ""
status "all, fakes that succeed" 0
ran "all: every program in order" "bench gemm 1024
bench gemm_bf16
bench gpt A 5
bench gpt B 5
bench gpt C 5
bench precision A 3 3
bench precision B 3 3
bench precision C 3 3
bench monitor A 5 20
bench_data
bench_ckpt A $T/bin/bench_ckpt_dir
bench_xent C 5 64
bench_dist
bench_dist
bench_pp
bench_cl gemm 1024
ptcl tune
bench_cl gemm 1024
bench_cl bandwidth
bench_cl gpt A 3
bench_recompute L12 3
bench_zero B 5
bench_zero B 5
bench_largest before auto 10 22
bench_largest after auto 10 22
bench_qmm 2
bench_recovery
bench_decode gpt2-85m-bytes f32 1,4,16 64 3
bench_decode gpt2-85m-bytes bf16 1,4,16 64 3
bench_decode gpt2-85m-bytes q8_0 1,4,16 64 3
bench_decode gpt2-85m-bytes q4_0 1,4,16 64 3
bench_decode gpt2-85m-bytes --profile f32,q8_0,q4_0 32
bench_decode gpt2-124m f32 1,4,16 64 3
bench_decode gpt2-124m bf16 1,4,16 64 3
bench_decode gpt2-124m q8_0 1,4,16 64 3
bench_decode gpt2-124m q4_0 1,4,16 64 3
bench_decode gpt2-124m --profile f32,q8_0,q4_0 32
bench_engine kv
bench_engine engine 48 20 1,2,3,4,6
bench_serve
bench gpt A 5
bench_decode gpt2-85m-bytes q8_0 1 32 3
bench_omp gpt A 5
bench_decode_omp gpt2-85m-bytes q8_0 1 32 3
bench gpt A 5
bench_decode gpt2-85m-bytes q8_0 1 32 3
bench_omp gpt A 5
bench_decode_omp gpt2-85m-bytes q8_0 1 32 3
bench gpt A 5
bench_decode gpt2-85m-bytes q8_0 1 32 3
bench_omp gpt A 5
bench_decode_omp gpt2-85m-bytes q8_0 1 32 3
bench gpt A 5
bench_decode gpt2-85m-bytes q8_0 1 32 3
bench_omp gpt A 5
bench_decode_omp gpt2-85m-bytes q8_0 1 32 3
bench_spec lookup gpt2-85m-bytes q8_0 128 3
bench_spec draft gpt2-124m q8_0 128 3
bench_infer_layout layout gpt2-124m 1 1 2 f32,q8_0 1,16 16
bench_infer_layout layout gpt2-124m 2 1 1 f32,q8_0 1,16 16
bench_infer_layout layout gpt2-124m 1 2 1 f32,q8_0 1,16 16
bench_infer_layout layout gpt2-124m 2 2 1 f32,q8_0 1,16 16
bench_infer_layout allreduce 768 2000
bench_serve_layout
bench_infer_large"
has "all: the second dist run takes the ring, the second OpenCL GEMM and the GPT step the tune file" \
    '"bench_dist","tune":"","alg":""' '"bench_dist","tune":"","alg":"1"' '"bench_cl gemm 1024","tune":"","alg"' \
    '"bench_cl gemm 1024","tune":"tuned"' '"bench_cl bandwidth","tune":""' '"bench_cl gpt A 3","tune":"tuned"'
order "all: JSON lines and the ok line of each benchmark in order" '"bench gemm 1024"' '^bench gemm: ok' '"bench gpt C 5"' \
    '^bench gpt: ok' '"bench_cl gpt A 3"' '^bench cl_gpt: ok' '"bench_recompute L12 3"' '^bench recompute: ok' '"bench_zero B 5"' '^bench zero: ok' \
    '"bench_largest after auto 10 22"' '^bench largest_model: ok' '^bench qmm: ok' '^bench recovery: ok' '^bench decode: ok' '^bench kv: ok' '^bench engine: ok' '^bench serve: ok' '^bench threads: ok' '^bench spec: ok' '^bench infer_layout: ok' '^bench serve_layout: ok' '^bench infer_large: ok' '^bench: 27 ok, 0 failed, 0 skipped$'
BENCH="" sh bench/run.sh --needs >"$T/needs" 2>&1
if [ "$(tr '\n' ' ' <"$T/needs")" = "bench bench_data bench_ckpt bench_xent bench_dist bench_pp bench_cl ptcl bench_recompute bench_zero bench_largest bench_qmm bench_recovery bench_decode bench_engine bench_serve bench_omp bench_decode_omp bench_spec bench_infer_layout bench_serve_layout bench_infer_large " ]; then pass "--needs: every program once"
else fail "--needs" "$(cat "$T/needs")"; fi

# each line reaches the output while its program still runs
go "gemm,data" FAKE_SEE="$T/all"
status "gemm,data, each waiting for its line to be written" 0
ran "gemm,data: both lines there" "bench gemm 1024
bench_data"

# a selection runs only those, in the order given, each once
go "data,gpt"
status "BENCH=data,gpt" 0
ran "BENCH=data,gpt: bench_data, then the three GPT configs" "bench_data
bench gpt A 5
bench gpt B 5
bench gpt C 5"
go "pp gemm,pp"
ran "BENCH='pp gemm,pp': spaces too, pp once" "bench_pp
bench gemm 1024"
if [ "$(BENCH=gemm,cl_bandwidth sh bench/run.sh --needs 2>&1 | tr '\n' ' ')" = "bench bench_cl " ]; then pass "--needs gemm,cl_bandwidth: bench bench_cl"
else fail "--needs gemm,cl_bandwidth" "$(BENCH=gemm,cl_bandwidth sh bench/run.sh --needs 2>&1)"; fi

# an unknown name: exit 2 naming it and the valid names, nothing run
go "gemm,nope"
status "BENCH=gemm,nope" 2
ran "BENCH=gemm,nope: nothing run" ""
has "BENCH=gemm,nope: names nope and lists the valid names" "unknown benchmark.*nope" '^gemm ' '^cl_gpt '
if [ -z "$(BENCH=list sh bench/run.sh --needs 2>&1)" ]; then pass "--needs with BENCH=list: nothing to build"; else fail "--needs with BENCH=list" "not empty"; fi
BENCH=nope sh bench/run.sh --needs >/dev/null 2>&1
RC=$?
status "--needs with an unknown name" 2

# a failing program: reported, the rest of its benchmark and the next one still run, exit 1
go "gpt,monitor" FAKE_FAIL="bench gpt B*"
status "gpt B failing" 1
ran "gpt B failing: gpt C and monitor still run" "bench gpt A 5
bench gpt B 5
bench gpt C 5
bench monitor A 5 20"
order "gpt B failing: reported after gpt, before monitor; the summary names it last" '"bench gpt C 5"' \
    '^bench gpt: FAILED \(exit 1: .*bench gpt B 5\)$' '"bench monitor A 5 20"' '^bench monitor: ok' '^bench: 1 ok, 1 failed \(gpt\), 0 skipped$'
if [ "$(tail -n 1 "$T/all")" = "bench: 1 ok, 1 failed (gpt), 0 skipped" ]; then pass "the summary is the last line"; else fail "summary" "$(tail -n 1 "$T/all")"; fi
go "dist,pp,ckpt" FAKE_FAIL="bench_pp*" BENCH_DIST="$T/missing"
status "dist missing, pp failing" 1
ran "dist missing, pp failing: ckpt still runs" "bench_pp
bench_ckpt A $T/bin/bench_ckpt_dir"
has "dist missing, pp failing: both reported" "^bench dist: FAILED \($T/missing missing: not built\)$" '^bench pp: FAILED \(exit 1' \
    '^bench: 1 ok, 2 failed \(dist pp\), 0 skipped$'
go "data" BENCH_DATA="$T/bin/bench_ckpt"
ran "BENCH_DATA overrides the program's path" "bench_ckpt"
go "pp" MPIRUN="$T/no_mpirun"
status "no mpirun" 0
has "no mpirun: pp skipped" "^bench pp: skipped \($T/no_mpirun not found\)$" '^bench: 0 ok, 0 failed, 1 skipped \(pp\)$'

# ptcl tune: only for cl_gemm and cl_gpt, only when the tune file is missing, only with a device
rm -f "$T/tune.txt"
go "cl_bandwidth,gemm"
ran "cl_bandwidth: no tuning" "bench_cl bandwidth
bench gemm 1024"
if [ -f "$T/tune.txt" ]; then fail "cl_bandwidth" "wrote the tune file"; else pass "cl_bandwidth: no tune file written"; fi
go "cl_gemm" FAKE_NO_CL=1
status "cl_gemm without an OpenCL device" 0
ran "cl_gemm without an OpenCL device: nothing run, no tuning" ""
has "cl_gemm without an OpenCL device: skipped" '^bench cl_gemm: skipped \(no OpenCL device'
go "cl_gpt"
ran "cl_gpt: tuned once, then the tuned step" "ptcl tune
bench_cl gpt A 3"
go "cl_gpt,cl_gemm"
ran "cl_gpt,cl_gemm with the tune file there: no tuning" "bench_cl gpt A 3
bench_cl gemm 1024
bench_cl gemm 1024"
rm -f "$T/tune.txt"
go "cl_gpt" BENCH_PTCL="$T/missing"
status "cl_gpt without ptcl" 0
ran "cl_gpt without ptcl: the untuned step" "bench_cl gpt A 3"
has "cl_gpt without ptcl: says so" '^bench cl_gpt: no tuned run' '"bench_cl gpt A 3","tune":""'

# bench/plot_serve.sh: the serve bench's lines -> the latency-vs-rate SVG (two servers, the SLO)
printf '%s\n' '{"bench":"serve_overhead","ratio":0.95}' \
    '{"bench":"serve","server":"ptserve","rate":2,"p50_ttft_s":0.05,"p99_ttft_s":0.1}' '{"bench":"serve","server":"ptserve","rate":8,"p50_ttft_s":0.5,"p99_ttft_s":2}' \
    '{"bench":"serve","server":"llama-server","rate":2,"p50_ttft_s":0.04,"p99_ttft_s":0.09}' '{"bench":"serve","server":"llama-server","rate":8,"p50_ttft_s":0.9,"p99_ttft_s":3}' \
    '{"bench":"serve_slo","slo_p99_ttft_s":1}' >"$T/serve.jsonl"
if sh bench/plot_serve.sh "$T/serve.jsonl" "$T/serve.svg" 2>"$T/plot.err" && [ "$(grep -c '<polyline' "$T/serve.svg")" = 4 ] &&
    grep -q '>ptserve<' "$T/serve.svg" && grep -q '>llama-server<' "$T/serve.svg" && grep -q 'SLO p99 1 s' "$T/serve.svg" && tail -n 1 "$T/serve.svg" | grep -q '</svg>'; then
    pass "plot_serve.sh: p50 and p99 lines for each server, the SLO, a complete SVG"
else fail "plot_serve.sh" "$(cat "$T/plot.err"; grep -c '<polyline' "$T/serve.svg" 2>/dev/null)"; fi
echo '{"bench":"gemm"}' >"$T/none.jsonl"
if sh bench/plot_serve.sh "$T/none.jsonl" "$T/none.svg" 2>"$T/plot.err"; then fail "plot_serve.sh with no serve lines" "exit 0"
elif grep -q 'no serve lines' "$T/plot.err" && [ ! -f "$T/none.svg" ]; then pass "plot_serve.sh with no serve lines: an error, no file"
else fail "plot_serve.sh with no serve lines" "$(cat "$T/plot.err")"; fi

# decode's profile: once per model after its formats; DECODE_PROFILE=0 skips it, DECODE_PROFILE_FORMATS / _TOKENS change it
go decode DECODE_MODELS=gpt2-85m-bytes DECODE_FORMATS="q8_0" DECODE_PROFILE_FORMATS=q4_0 DECODE_PROFILE_TOKENS=8
ran "decode: the profile after the model's formats" "bench_decode gpt2-85m-bytes q8_0 1,4,16 64 3
bench_decode gpt2-85m-bytes --profile q4_0 8"
go decode DECODE_MODELS="gpt2-85m-bytes gpt2-124m" DECODE_FORMATS="q8_0" DECODE_PROFILE=0
ran "decode: DECODE_PROFILE=0 skips the profile" "bench_decode gpt2-85m-bytes q8_0 1,4,16 64 3
bench_decode gpt2-124m q8_0 1,4,16 64 3"

# decode's peer: each format it does not run gets a decode_peer line on stdout (valid JSON) naming why:
# no BENCH_LLAMA, a failing GGUF export, a failing peer (its last stderr line, quotes escaped)
# dpeer CASE EXPECTED-ERROR-SUBSTRING [VAR=VALUE...]
dpeer() {
    c=$1 want=$2
    shift 2
    env BENCH=decode BENCH_BUILD="$T/bin" DECODE_MODELS=gpt2-124m DECODE_FORMATS="f32 bf16 q4_0" "$@" sh bench/run.sh >"$T/dout" 2>"$T/derr"
    if python3 -c '
import json, sys
want = sys.argv[2]
ls = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"bench\":\"decode_peer\"")]
ok = [l for l in ls if l["model"] == "gpt2-124m" and want in l.get("error", "")]
fm = sorted(l["format"] for l in ok)
sys.exit(0 if len(ls) == 2 and fm == ["f32", "q4_0"] else 1)' "$T/dout" "$want" 2>"$T/dpy"; then
        pass "decode peer $c: a decode_peer line on stdout for f32 and q4_0 (not bf16) saying '$want'"
    else
        fail "decode peer $c" "stdout: $(grep decode_peer "$T/dout" | head -c 600) $(head -c 300 "$T/dpy")"
    fi
}
dpeer "not configured" "not run: BENCH_LLAMA is not set"
printf '#!/bin/sh\necho '"'"'llama_model_load: error "vocab" \\ 50257'"'"' >&2\nexit 1\n' >"$T/bin/badpeer"
chmod +x "$T/bin/badpeer"
dpeer "failing" 'llama_model_load: error "vocab" \ 50257' BENCH_LLAMA="$T/bin/badpeer"
dpeer "export failing" "not run: the GGUF export failed" BENCH_LLAMA="$T/bin/badpeer" FAKE_FAIL="bench_decode gpt2-124m --gguf-out*"

# decode's peer as llama.cpp's own llama-bench (BENCH_LLAMA_BENCH): a fake printing llama-bench-shaped jsonl
# (decode for -p 0, prefill for -p 256; FAKE_LB_FAIL=1: a message on stderr and exit 1), its calls in $T/lb_calls;
# FAKE_DECODE=1 makes the fake bench_decode print a batch-1 decode line (50 tokens/s, prefill 450: see the fakes)
cat >"$T/bin/llama-bench" <<'EOF'
#!/bin/sh
echo "$*" >>"${FAKE_LB_CALLS:-/dev/null}"
if [ "${FAKE_LB_FAIL:-0}" = 1 ]; then echo 'llama_model_load: error loading model: "vocab" \ bad' >&2; exit 1; fi
p=0 n=0
while [ $# -gt 0 ]; do case $1 in -p) p=$2; shift 2 ;; -n) n=$2; shift 2 ;; *) shift ;; esac; done
ts=100.5
[ "$p" -gt 0 ] && ts=900.25
echo "{\"build_commit\": \"0c1e570\", \"build_number\": 1, \"model_type\": \"gpt2 0.1B Q4_0\", \"n_threads\": 2, \"n_prompt\": $p, \"n_gen\": $n, \"avg_ns\": 42554143, \"stddev_ns\": 0, \"avg_ts\": $ts, \"stddev_ts\": 0.000000, \"samples_ns\": [ 42554143 ],\"samples_ts\": [ $ts ]}"
EOF
chmod +x "$T/bin/llama-bench"
: >"$T/tok.bin"
# lbpeer CASE CHECK [VAR=VALUE...]: bench/run.sh's decode on gpt2-124m f32, bf16, q4_0 with the fake llama-bench; CHECK is
# Python over the JSON lines of stdout (ls), the fakes' calls (ran) and llama-bench's (lb)
lbpeer() {
    c=$1 chk=$2
    shift 2
    : >"$T/lb_calls"
    env BENCH=decode BENCH_BUILD="$T/bin" DECODE_MODELS=gpt2-124m DECODE_FORMATS="f32 bf16 q4_0" DECODE_PROFILE=0 DECODE_TOKENIZER="$T/tok.bin" FAKE_DECODE=1 \
        BENCH_LLAMA_BENCH="$T/bin/llama-bench" FAKE_LB_CALLS="$T/lb_calls" "$@" sh bench/run.sh >"$T/dout" 2>"$T/derr"
    if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"bench\"")]
ran = [json.loads(l)["fake"] for l in open(sys.argv[1]) if l.startswith("{\"fake\"")]
lb = [l.split() for l in open(sys.argv[2])]
peer = [l for l in ls if l["bench"] == "decode_peer"]
vs = [l for l in ls if l["bench"] == "decode_vs_llama"]
sys.exit(0 if eval("(" + sys.argv[3] + ")") else 1)' "$T/dout" "$T/lb_calls" "$chk" 2>"$T/dpy"; then pass "decode peer llama-bench: $c"
    else fail "decode peer llama-bench: $c" "stdout: $(grep -v fake "$T/dout" | head -c 900) calls: $(head -c 300 "$T/lb_calls") $(head -c 300 "$T/dpy")"; fi
}
lbpeer "decode_peer lines for f32 and q4_0 (not bf16) from its jsonl: tokens/s, prefill, \"peer\":\"llama-bench\"" \
    'len(peer) == 2 and sorted(p["format"] for p in peer) == ["f32", "q4_0"] and all(p["peer"] == "llama-bench" and p["model"] == "gpt2-124m" and p["batch"] == 1
     and p["tokens_per_s"] == 100.5 and p["prefill_tokens_per_s"] == 900.2 and p["build"] == "0c1e570" and "error" not in p for p in peer)'
lbpeer "decode_vs_llama lines: ptrain over llama-bench, decode and prefill, round 1" \
    'len(vs) == 2 and all(v["round"] == 1 and v["ratio"] == 0.498 and v["prefill_ratio"] == 0.5 and v["llama_tokens_per_s"] == 100.5 and v["ptrain_tokens_per_s"] == 50 for v in vs)'
lbpeer "llama-bench runs -m GGUF -t 2 -p 0 -n 64 -r 3 -o jsonl (decode), then -p 256 -n 0 (prefill); the GGUF export has the 124M tokenizer" \
    'len(lb) == 4 and lb[0][2:] == "-t 2 -p 0 -n 64 -r 3 -o jsonl".split() and lb[1][2:] == "-t 2 -p 256 -n 0 -r 3 -o jsonl".split() and lb[0][1].endswith("gpt2-124m.f32.gguf")
     and lb[2][1].endswith("gpt2-124m.q4_0.gguf") and any(r.startswith("bench_decode gpt2-124m --gguf-out ") and r.endswith(" f32 --tokenizer " + sys.argv[1][:-4] + "tok.bin") for r in ran)'
lbpeer "BENCH_LLAMA set too: llama-bench preferred" 'len(peer) == 2 and all(p["peer"] == "llama-bench" for p in peer) and len(lb) == 4' BENCH_LLAMA="$T/bin/badpeer"
lbpeer "a failing llama-bench: a decode_peer line with its error on stdout, per format" \
    'len(peer) == 2 and all("the llama.cpp peer" in p["error"] and "error loading model: \"vocab\" \\ bad" in p["error"] for p in peer) and not vs' FAKE_LB_FAIL=1
lbpeer "DECODE_ROUNDS=3: ptrain and llama-bench interleaved, a decode_vs_llama line per round, then the medians" \
    '[r.split()[0] for r in ran if "--gguf-out" not in r] == ["bench_decode"] * 9 and len(lb) == 12 and [v.get("round") for v in vs] == [1, 2, 3, None, 1, 2, 3, None]
     and all(v["rounds"] == 3 and v["ratio"] == 0.498 for v in vs if "rounds" in v)' DECODE_ROUNDS=3

# spec: the real program on its tiny model (about a second): each line's shape, and the same tokens with drafting
if cc -std=c99 -O1 -DPTRAIN_STATIC -I. bench/bench_spec.c -o "$T/bench_spec_real" -lm >"$T/spec.build" 2>&1; then
    { "$T/bench_spec_real" lookup tiny q8_0 24 1 && "$T/bench_spec_real" draft tiny q8_0 24 1; } >"$T/spec.out" 2>"$T/spec.err"
    if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
num = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
ok = len(ls) == 3 and [(l["case"], l["method"]) for l in ls] == [("quote", "lookup"), ("novel", "lookup"), ("quote", "draft")]
ok = ok and all(l["bench"] == "spec" and all(num(l[k]) and l[k] >= 0 for k in ("speedup", "acceptance", "tokens_per_s", "base_tokens_per_s"))
                and l["acceptance"] <= 1 and l["identical"] == 1 for l in ls)
sys.exit(0 if ok else 1)' "$T/spec.out" 2>"$T/spec.py"; then pass "spec: bench_spec (tiny model) prints quote/novel lookup and quote draft lines of the documented shape, identical tokens"
    else fail "spec lines" "$(cat "$T/spec.out" "$T/spec.err" "$T/spec.py" | head -c 800)"; fi
else fail "spec: bench_spec does not build" "$(head -c 600 "$T/spec.build")"; fi

# kv's q8_0 lines from the real bench_engine at its smallest settings (8 requests, context 16; a few
# seconds): the fields the checks read, numbers where numbers belong
INC=.
CC=${CC:-cc}
. tests/build_lib.sh
if ! build_prog "$T/bench_engine" bench/bench_engine.c opt -D_POSIX_C_SOURCE=200809L >"$T/bench_engine.build.log" 2>&1; then
    fail "kv kv_q8_0: bench_engine builds" "$(head -c 600 "$T/bench_engine.build.log")"
elif ! "$T/bench_engine" kvq8 8 16 >"$T/kvq8.out" 2>"$T/kvq8.err"; then
    fail "kv kv_q8_0: bench_engine kvq8 8 16 runs" "$(head -c 600 "$T/kvq8.err")"
elif python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
c = {l.get("case"): l for l in ls if l.get("bench") == "kv"}
num = lambda l, k: isinstance(l.get(k), (int, float)) and not isinstance(l.get(k), bool) and l[k] > 0
a, b = c.get("kv_q8_0", {}), c.get("kv_q8_0_decode", {})
ok = all(num(a, k) for k in ("q8_over_f32_requests", "q8_over_f16_requests", "mean_running_f32", "mean_running_q8_0", "kv_budget_bytes"))
ok = ok and a["blocks_q8_0"] * 4 // a["blocks_f32"] == 15 and a["requests"] == 8
ok = ok and all(num(b, k) for k in ("f32_tokens_per_s", "f16_tokens_per_s", "q8_0_tokens_per_s", "q8_over_f32_speed")) and b["context"] == 16 and b["batch"] == 4
sys.exit(0 if ok and len(ls) == 2 else 1)' "$T/kvq8.out" 2>"$T/kvq8.py"; then
    pass "kv kv_q8_0: bench_engine kvq8 prints the requests line (q8_over_f32_requests, q8_over_f16_requests; 3.76x the f32 blocks) and the decode line"
else fail "kv kv_q8_0 lines" "$(head -c 800 "$T/kvq8.out") $(head -c 300 "$T/kvq8.py")"; fi

# infer_layout: the real program (mpicc) through bench/run.sh on the tiny model, 2 timed steps, 100 sums a path (about 10 s,
# most of it the build): one line per layout (one, tp2, pp2, tp2xpp2), format and batch with the documented fields, vs_one
# joined from the baseline, tp2xpp2 noted as oversubscribed; the three allreduce_small paths
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
    if mpicc -std=c99 -O1 -DPTRAIN_STATIC -DPTRAIN_MPI -fopenmp -I. bench/bench_infer_layout.c -o "$T/bench_infer_layout_real" -lm >"$T/il.build" 2>&1; then
        env BENCH=infer_layout BENCH_INFER_LAYOUT="$T/bench_infer_layout_real" INFER_LAYOUT_MODEL=tiny INFER_LAYOUT_STEPS=2 INFER_LAYOUT_REPS=100 \
            OMPI_MCA_mpi_yield_when_idle=1 timeout 120 sh bench/run.sh >"$T/il.out" 2>"$T/il.err"
        if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
num = lambda l, k: isinstance(l.get(k), (int, float)) and not isinstance(l.get(k), bool)
il = [l for l in ls if l["bench"] == "infer_layout"]
ar = [l for l in ls if l["bench"] == "allreduce_small"]
want = [(y, f, b) for y in ("one", "tp2", "pp2", "tp2xpp2") for f in ("f32", "q8_0") for b in (1, 16)]
ok = [(l["layout"], l["format"], l["batch"]) for l in il] == want
ok = ok and all(all(num(l, k) for k in ("tokens_per_s", "vs_one", "comm_share", "comm_share_max", "sums_per_step", "p2p_per_step", "gathers_per_step",
                                          "commands_per_step", "weight_bytes_max")) and l["tokens_per_s"] > 0 and l["vs_one"] > 0 and l["model"] == "tiny"
                and 0 <= l["comm_share"] <= 1 and 0 <= l["comm_share_max"] <= 1 and l["weight_bytes_max"] > 0 for l in il)
ok = ok and all(l["vs_one"] == 1 and l["comm_share"] == 0 and l["ranks"] == 1 and l["threads"] == 2 for l in il if l["layout"] == "one")
ok = ok and all(l["comm_share"] > 0 and l["commands_per_step"] > 0 and l["threads"] == 1 for l in il if l["layout"] != "one")
ok = ok and all(l["sums_per_step"] == 9 and l["gathers_per_step"] == 1 for l in il if l["layout"] == "tp2")
ok = ok and all(l["p2p_per_step"] == 2 * min(l["batch"], 2) and l["pp_groups"] == 0 for l in il if l["layout"] == "pp2") # micro-batches: pp at most
ok = ok and all(l["ranks"] == 4 and "oversubscribed" in l.get("note", "") for l in il if l["layout"] == "tp2xpp2")
ok = ok and sorted(l["path"] for l in ar) == ["mpi_allreduce", "ptrain", "sendrecv"] and all(l["n"] == 768 and l["ranks"] == 2 and num(l, "us") and l["us"] > 0 for l in ar)
sys.exit(0 if ok else 1)' "$T/il.out" 2>"$T/il.py"; then
            pass "infer_layout: bench_infer_layout (tiny model) through run.sh: one, tp2, pp2, tp2xpp2 x f32, q8_0 x batch 1, 16 with tokens_per_s, vs_one, comm_share; 3 allreduce_small paths"
        else fail "infer_layout lines" "$(head -c 900 "$T/il.out") $(tail -c 400 "$T/il.err") $(head -c 300 "$T/il.py")"; fi
    else fail "infer_layout: bench_infer_layout does not build" "$(head -c 600 "$T/il.build")"; fi
else fail "infer_layout" "mpicc / mpirun not found (make deps installs openmpi-bin and libopenmpi-dev)"; fi

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
