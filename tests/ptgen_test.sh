#!/bin/sh
# tests/ptgen_test.sh [WORKDIR] - tools/ptgen and examples/11_inference as a user meets them.
# A tiny GPT is trained by build/pttrain (byte-level, then BPE shards: its checkpoint carries the
# tokenizer); ptgen continues a prompt from the checkpoint, from its safetensors export and from its
# GGUF export (ptckpt export --format gguf), greedy: the same ids from all three (f32); --quant q8_0
# runs the quantized path (other ids or logprobs than f32); --n 3 batches three seeds, each the same
# text as alone; a stop string ends the text before it; --lookup and --draft give the ids and logprobs
# without them; --device opencl gives the text of --device cpu. Bad input: a missing model, a file of
# another kind, a bad flag, a prompt longer than the context, an unknown --quant: exit 1 or 2 with a
# message naming it. 11_inference prints its quality table: four formats, each with a perplexity.
# Prints PASS/FAIL lines and "N passed, N failed".
set -u
W=${1:-build/tests/ptgen}
mkdir -p "$W" build
P=0
F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; F=$((F + 1)); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset PTRAIN_PROGRESS

# builds: ptgen with its Build: line (the Makefile's recipe), ptckpt, pttrain (make: nothing when built)
bline=$(sed -n 's/^ *Build: //p' tools/ptgen.c | head -n 1)
recipe=$(sed -n '/^$(BUILD)\/ptgen:/{n;p;}' Makefile | sed 's/^[[:space:]]*//; s|\$@|build/ptgen|; s|\$(CC)|cc|')
if [ "$bline" = "$recipe" ] && sh -c "$bline" >"$W/ptgen.build.log" 2>&1; then pass "ptgen builds with its Build: line, the Makefile's recipe"
else fail "ptgen: Build: '$bline', Makefile '$recipe': $(head -c 400 "$W/ptgen.build.log")"; fi
make -s build/ptckpt build/pttrain build/prepare_shards build/11_inference >"$W/make.log" 2>&1 || fail "make build/ptckpt build/pttrain build/prepare_shards build/11_inference: $(tail -n 5 "$W/make.log")"
G=./build/ptgen

# the corpus and a tiny model, byte-level (context 32)
mkdir -p "$W/corpus"
i=0
: >"$W/corpus/train.txt"
while [ $i -lt 300 ]; do echo "the quick brown fox jumps over the lazy dog $i times." >>"$W/corpus/train.txt"; i=$((i + 1)); done
head -n 60 "$W/corpus/train.txt" >"$W/corpus/val.txt"
rm -rf "$W/corpus/"*.bin "$W/ck" "$W/ckbpe" "$W/bpe"
tiny="--layers 2 --width 64 --heads 4 --seq 32 --batch 8 --seed 3 --val-every 0 --lr 1e-2"
./build/pttrain --data "$W/corpus" $tiny --steps 60 --sample 24 --temperature 0 --ckpt-dir "$W/ck" --ckpt-every 60 >"$W/train.log" 2>&1 ||
    fail "pttrain (the tiny model): $(tail -n 3 "$W/train.log")"

# 1. greedy from the checkpoint: text streamed, the stats line; the ids of the uncached path
prompt=$(printf 'the quick')
$G "$W/ck" --prompt "$prompt" --max-tokens 24 --temperature 0 --print-ids >"$W/g1.out" 2>"$W/g1.err"
rc=$?
ids=$(sed -n 's/^ids: //p' "$W/g1.out")
if [ $rc -eq 0 ] && [ "$(echo "$ids" | tr ',' '\n' | wc -l)" -eq 24 ] && grep -q '^ptgen: f32 weights .* prefill 9 tokens .* tokens/s, decode 2[34] tokens .* tokens/s$' "$W/g1.err"; then
    pass "ptgen CKPT --temperature 0: 24 ids, the stats line ($(tail -n 1 "$W/g1.err"))"
else fail "ptgen greedy: exit $rc, ids '$ids', $(cat "$W/g1.err")"; fi
text=$(head -c 24 "$W/g1.out")
if [ -n "$text" ] && [ "$(printf '%s' "$text" | od -An -tu1 | tr -s ' \n' ',' | sed 's/^,//; s/,$//')" = "$ids" ]; then
    pass "ptgen streams the text of its ids (bytes): '$text'"
else fail "ptgen text '$text' vs ids '$ids'"; fi

# 2. the same from the safetensors and the GGUF exports
./build/ptckpt export "$W/ck" "$W/m.safetensors" >"$W/exp1.log" 2>&1
./build/ptckpt export --format gguf "$W/ck" "$W/m.gguf" >"$W/exp2.log" 2>&1
for f in m.safetensors m.gguf; do
    $G "$W/$f" --prompt "$prompt" --max-tokens 24 --temperature 0 --print-ids >"$W/g_$f.out" 2>"$W/g_$f.err"
    rc=$?
    got=$(sed -n 's/^ids: //p' "$W/g_$f.out")
    if [ $rc -eq 0 ] && [ -n "$ids" ] && [ "$got" = "$ids" ]; then pass "ptgen $f: the checkpoint's greedy ids"
    else fail "ptgen $f: exit $rc, '$got' vs '$ids'; $(cat "$W/exp1.log" "$W/exp2.log" "$W/g_$f.err" | head -c 600)"; fi
done

# 2b. speculative decoding: --lookup (greedy) and --draft (the safetensors export as its own draft model,
# sampled), past the context (refills): the ids and logprobs of the run without, tokens drafted
sp="--max-tokens 40 --print-ids --logprobs"
$G "$W/ck" --prompt "$prompt" $sp --temperature 0 >"$W/s0.out" 2>/dev/null
$G "$W/ck" --prompt "$prompt" $sp --temperature 0 --lookup 4 >"$W/s1.out" 2>"$W/s1.err"
rc=$?
dr=$(sed -n 's/^ptgen: speculative decoding (prompt lookup): \([0-9]*\) tokens drafted.*/\1/p' "$W/s1.err")
if [ $rc -eq 0 ] && [ -s "$W/s0.out" ] && cmp -s "$W/s0.out" "$W/s1.out" && [ "${dr:-0}" -gt 0 ]; then
    pass "ptgen --lookup 4: the ids and logprobs of greedy decoding without it ($(tail -n 1 "$W/s1.err"))"
else fail "ptgen --lookup: exit $rc, drafted '$dr', $(diff "$W/s0.out" "$W/s1.out" | head -c 300) $(cat "$W/s1.err" | head -c 300)"; fi
$G "$W/ck" --prompt "$prompt" $sp --temperature 0.8 --seed 5 >"$W/s2.out" 2>/dev/null
$G "$W/ck" --prompt "$prompt" $sp --temperature 0.8 --seed 5 --draft "$W/m.safetensors" --draft-tokens 3 >"$W/s3.out" 2>"$W/s3.err"
rc=$?
if [ $rc -eq 0 ] && [ -s "$W/s2.out" ] && cmp -s "$W/s2.out" "$W/s3.out" && grep -q '^ptgen: speculative decoding (draft model): [1-9][0-9]* tokens drafted' "$W/s3.err"; then
    pass "ptgen --draft MODEL (sampled, seed 5): the ids and logprobs without it ($(tail -n 1 "$W/s3.err"))"
else fail "ptgen --draft: exit $rc, $(diff "$W/s2.out" "$W/s3.out" | head -c 300) $(cat "$W/s3.err" | head -c 300)"; fi
$G "$W/ck" --prompt "$prompt" --lookup 17 >/dev/null 2>"$W/s4.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- '--lookup' "$W/s4.err"; then pass "ptgen --lookup 17: exit 2 naming the flag"
else fail "ptgen --lookup 17: exit $rc, $(head -c 300 "$W/s4.err")"; fi

# 2c. --device opencl: the steps on the OpenCL device (PoCL in the CI), the sampler on the host: the
# greedy text and ids of --device cpu, logprobs within 2e-4; two sampled sequences in one batch (the
# engine) and an f16 KV cache likewise; no OpenCL platform or library: skipped (not counted)
dv="--max-tokens 40 --print-ids --logprobs"
$G "$W/ck" --prompt "$prompt" $dv --temperature 0 --device opencl >"$W/d1.out" 2>"$W/d1.err"
rc=$?
if [ $rc -ne 0 ] && grep -q -e 'no OpenCL platform' -e 'cannot load' "$W/d1.err"; then
    echo "SKIP ptgen --device opencl: $(grep -m 1 -e 'no OpenCL platform' -e 'cannot load' "$W/d1.err" | head -c 200) (not counted)"
else
    $G "$W/ck" --prompt "$prompt" $dv --temperature 0 --device cpu >"$W/d0.out" 2>/dev/null
    lpclose() { python3 -c '
import sys
a, c = [[float(x) for x in open(f).read().split("logprobs: ")[1].split(",")] for f in sys.argv[1:3]]
sys.exit(0 if len(a) == len(c) and max(abs(x - y) for x, y in zip(a, c)) <= 2e-4 else 1)' "$1" "$2"; }
    if [ $rc -eq 0 ] && [ "$(sed '/^logprobs: /d' "$W/d1.out")" = "$(sed '/^logprobs: /d' "$W/d0.out")" ] && lpclose "$W/d0.out" "$W/d1.out" &&
        grep -q '^ptgen: f32 weights .*, opencl, .* decode [0-9]* tokens' "$W/d1.err"; then
        pass "ptgen --device opencl: the greedy text and ids of --device cpu, logprobs within 2e-4 ($(tail -n 1 "$W/d1.err"))"
    else fail "ptgen --device opencl: exit $rc, $(diff "$W/d0.out" "$W/d1.out" | head -c 400) $(head -c 300 "$W/d1.err")"; fi
    for dvc in cpu opencl; do
        $G "$W/ck" --prompt "$prompt" --max-tokens 24 --temperature 0.8 --seed 5 --n 2 --kv-type f16 --print-ids --device $dvc >"$W/d2_$dvc.out" 2>"$W/d2_$dvc.err"
    done
    if [ -s "$W/d2_cpu.out" ] && cmp -s "$W/d2_cpu.out" "$W/d2_opencl.out"; then
        pass "ptgen --device opencl --n 2 --kv-type f16 (sampled, one batch through the engine): the sequences of --device cpu"
    else fail "ptgen --device opencl --n 2: $(diff "$W/d2_cpu.out" "$W/d2_opencl.out" | head -c 400) $(head -c 300 "$W/d2_opencl.err")"; fi
fi
$G "$W/ck" --device gpu >/dev/null 2>"$W/d3.err"
rc=$?
if [ $rc -eq 2 ] && grep -q -- "--device expects cpu or opencl" "$W/d3.err"; then pass "ptgen --device gpu: exit 2 naming the flag and what it expects"
else fail "ptgen --device gpu: exit $rc, $(head -c 300 "$W/d3.err")"; fi

# 3. q8_0 really runs: the logprobs of the same prompt differ from f32's
$G "$W/ck" --prompt "$prompt" --max-tokens 8 --temperature 0 --logprobs >"$W/f32lp.out" 2>/dev/null
$G "$W/ck" --prompt "$prompt" --max-tokens 8 --temperature 0 --logprobs --quant q8_0 >"$W/q8lp.out" 2>"$W/q8lp.err"
rc=$?
a=$(sed -n 's/^logprobs: //p' "$W/f32lp.out")
b=$(sed -n 's/^logprobs: //p' "$W/q8lp.out")
if [ $rc -eq 0 ] && [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && grep -q '^ptgen: q8_0 weights' "$W/q8lp.err"; then
    pass "ptgen --quant q8_0: the quantized path ran (logprobs differ from f32's)"
else fail "ptgen --quant q8_0: exit $rc, f32 '$a', q8_0 '$b'; $(cat "$W/q8lp.err")"; fi

# the KV cache in fp16 (--kv-type f16): it runs, and its logprobs are f32's rounded (near, not equal)
$G "$W/ck" --prompt "$prompt" --max-tokens 8 --temperature 0 --logprobs --kv-type f16 >"$W/kv16.out" 2>"$W/kv16.err"
rc=$?
c=$(sed -n 's/^logprobs: //p' "$W/kv16.out")
if [ $rc -eq 0 ] && [ -n "$c" ] && [ -n "$a" ] && python3 -c '
import sys
a, c = [[float(x) for x in v.split(",")] for v in sys.argv[1:3]]
sys.exit(0 if len(a) == len(c) == 8 and max(abs(x - y) for x, y in zip(a, c)) < 0.05 else 1)' "$a" "$c"; then
    pass "ptgen --kv-type f16: runs, logprobs within 0.05 of the f32 cache's"
else fail "ptgen --kv-type f16: exit $rc, f32 '$a', f16 '$c'; $(cat "$W/kv16.err")"; fi

# 4. --n 3: three seeds in one batch, each the text it has alone
$G "$W/ck" --prompt "$prompt" --max-tokens 16 --seed 7 --n 3 >"$W/batch.out" 2>/dev/null
ok=1
for k in 0 1 2; do
    $G "$W/ck" --prompt "$prompt" --max-tokens 16 --seed $((7 + k)) >"$W/alone$k.out" 2>/dev/null
    alone=$(head -c 16 "$W/alone$k.out")
    inb=$(sed -n "/^--- sequence $k (seed $((7 + k)))\$/{n;p;}" "$W/batch.out" | head -c 16)
    [ -n "$alone" ] && [ "$alone" = "$inb" ] || ok=0
done
if [ $ok = 1 ]; then pass "ptgen --n 3: each sequence of the batch is the text its seed gives alone"
else fail "ptgen --n 3: $(cat "$W/batch.out") vs alone $(cat "$W/alone0.out" "$W/alone1.out" "$W/alone2.out")"; fi

# 5. a stop string (three bytes from the middle of the greedy text): the text ends before it
$G "$W/ck" --prompt "$prompt" --max-tokens 40 --temperature 0 >"$W/full.out" 2>/dev/null
full=$(cat "$W/full.out")
stop=$(printf '%s' "$full" | cut -c 12-14)
$G "$W/ck" --prompt "$prompt" --max-tokens 40 --temperature 0 --stop "$stop" >"$W/stop.out" 2>/dev/null
want="${full%%"$stop"*}"
if [ -n "$stop" ] && [ "$(cat "$W/stop.out")" = "$want" ] && [ "$want" != "$full" ]; then pass "ptgen --stop '$stop': the text ends before it ('$want')"
else fail "ptgen --stop '$stop': '$(cat "$W/stop.out")' vs '$want' (of '$full')"; fi

# 6. errors
check_err() { # NAME WANT_RC PATTERN CMD...
    name=$1 want=$2 pat=$3
    shift 3
    "$@" >"$W/err.out" 2>&1
    rc=$?
    if [ $rc -eq "$want" ] && grep -q -e "$pat" "$W/err.out"; then pass "ptgen $name: exit $rc naming it"
    else fail "ptgen $name: exit $rc (want $want), '$(head -c 300 "$W/err.out")'"; fi
}
check_err "missing model" 1 "$W/nosuch" $G "$W/nosuch"
check_err "a text file as model" 1 "neither a checkpoint directory" $G "$W/corpus/train.txt"
check_err "unknown flag" 2 "unknown flag --frobnicate" $G "$W/ck" --frobnicate
check_err "bad --max-tokens" 2 "max-tokens expects a whole number" $G "$W/ck" --max-tokens x
check_err "bad --quant" 2 "quant expects f32, bf16, q8_0 or q4_0, found 'q3'" $G "$W/ck" --quant q3
check_err "bad --kv-type" 2 "kv-type expects f32, f16 or q8_0, found 'q4_0'" $G "$W/ck" --kv-type q4_0
check_err "--kv-type q8_0 on heads of 16" 1 "kv_type q8_0 needs a head size that is a multiple of 32.*found head size 16" $G "$W/ck" --kv-type q8_0
check_err "prompt past the context" 2 "longer than the model's context of 32 tokens" $G "$W/ck" --prompt "$(head -c 100 "$W/corpus/train.txt")"
check_err "prompt ids past the vocabulary" 2 "prompt-ids expects comma-separated ids in \[0, 256)" $G "$W/ck" --prompt-ids 1,999
printf 'GGUF\003\000\000\000' >"$W/trunc.gguf"
check_err "a truncated GGUF" 1 "trunc.gguf" $G "$W/trunc.gguf"

# 7. a BPE model: its checkpoint carries the tokenizer, so the prompt is encoded and the text decoded
if ./build/prepare_shards --bpe 40 --val "$W/corpus/val.txt" "$W/bpe" "$W/corpus/train.txt" >"$W/bpe.log" 2>&1 &&
    ./build/pttrain --data "$W/bpe" $tiny --steps 30 --sample 0 --ckpt-dir "$W/ckbpe" --ckpt-every 30 >"$W/trainbpe.log" 2>&1; then
    $G "$W/ckbpe" --prompt "the quick" --max-tokens 10 --temperature 0 --print-ids >"$W/bpe.out" 2>"$W/bpe.err"
    rc=$?
    n=$(head -n 1 "$W/bpe.out" | wc -c)
    if [ $rc -eq 0 ] && grep -q '^ids: ' "$W/bpe.out" && [ "$n" -gt 11 ] && grep -q 'prefill [1-8] tokens' "$W/bpe.err"; then
        pass "ptgen on a BPE checkpoint: the prompt encoded (fewer tokens than bytes), 10 tokens decoded into $((n - 1)) bytes"
    else fail "ptgen BPE: exit $rc, $(head -c 300 "$W/bpe.out") $(cat "$W/bpe.err")"; fi
else fail "the BPE model: $(tail -n 3 "$W/bpe.log" "$W/trainbpe.log")"; fi

# 8. 11_inference: the quality table of the byte model (four formats, each with a perplexity > 1)
./build/11_inference "$W/ck" --prompt "the quick" --val "$W/corpus/val.txt" --max-tokens 20 --eval-tokens 2000 >"$W/11.log" 2>&1
rc=$?
rows=$(grep -c -E '^\| (f32|bf16|q8_0|q4_0) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$W/11.log")
if [ $rc -eq 0 ] && [ "$rows" -eq 4 ] && grep -q '^--- greedy' "$W/11.log" &&
    awk -F'|' '/^\| (f32|bf16|q8_0|q4_0) / { if (!($5 > 1)) bad = 1 } END { exit bad }' "$W/11.log"; then
    pass "11_inference: greedy and sampled text, the quality table's 4 rows: $(grep '^| q8_0' "$W/11.log")"
else fail "11_inference: exit $rc, $rows rows; $(tail -n 8 "$W/11.log")"; fi

echo "$P passed, $F failed"
[ $F -eq 0 ]
