#!/bin/sh
# tests/ckpttool_test.sh [BUILD_DIR] - checkpoint inspection and safetensors export/import: the
# library (tests/test_ckpttool.c, 1 rank, also under ASan/UBSan, and dp2 x tp2 with ZeRO-1 under
# mpirun -np 4) and the command tools/ptckpt.c: inspect, verify (0 / 1 naming the bad file), export
# (the same bytes as the library's; an export of a corrupted checkpoint fails and leaves the old
# file), import (the forward loss of the imported checkpoint equals the original's bit for bit; a
# malformed file or another shape is refused with a message and the existing checkpoint stays
# valid; the tool, built without PTRAIN_TEST_HOOKS, ignores PTRAIN_CKPT_FAIL), import of GPT-2's tokenizer
# files (a hand-made vocab.json + merges.txt in GPT-2's layout: `ptckpt encode` gives GPT-2's ids and the
# text back; a malformed line, merges out of order, a vocab.json that is not JSON or has a non-integer id
# are refused naming file, line and what was expected). When a Python with
# the safetensors package is at hand (env PTRAIN_PYTHON, default python3), it reads every export and writes a file that the tool imports; without it that part is
# skipped with a NOTE (the spec checks of test_ckpttool stand in). Prints PASS/FAIL lines and
# "N passed, N failed"; ~10 s.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive
T=$BUILD/ckpttool
rm -rf "$T" "$T.asan" "$T.mpi"
mkdir -p "$T"
case $T in /*) TA=$T ;; *) TA=./$T ;; esac

# expect NAME WANT_RC GREP LOG CMD...: runs CMD, checks its exit status and that its output has GREP
expect() {
    name=$1 want=$2 pat=$3 log=$4
    shift 4
    "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -e "$pat" "$log"; then pass "$name"
    else fail "$name" "exit $rc (want $want), '$pat' $(grep -q -e "$pat" "$log" && echo found || echo 'not found'): $(head -c 400 "$log")"; fi
}

# the builds start together (one core each); each is waited for where it is first needed
$CC $W $PT_OWN tests/test_ckpttool.c -o "$T/test_ckpttool" -lm >"$T/build.log" 2>&1 &
p_b1=$!
build_prog "$T/ptckpt" tools/ptckpt.c tool+posix >"$T/ptckpt.build.log" 2>&1 &
p_b2=$!
mpicc $W -DPTRAIN_MPI -fopenmp $PT_OWN -I"$INC" tests/test_ckpttool.c -o "$T/test_ckpttool_mpi" -lm >"$T/mpi.build.log" 2>&1 &
p_b3=$!
p_asan=""
[ "${NO_ASAN:-0}" != 1 ] && build_bg "$T/asan.build.log" $CC -std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra \
    $PT_OWN -I"$INC" tests/test_ckpttool.c -o "$T/test_ckpttool.asan" -lm && p_asan=$!
if wait $p_b1; then
    prog "test_ckpttool (1 rank)" "$T/np1.log" "$TA/test_ckpttool" "$T/lib"
else
    fail "build test_ckpttool" "see $T/build.log"
    head -n 20 "$T/build.log" | sed 's/^/    /'
fi
if [ -n "$p_asan" ]; then
    if wait $p_asan; then
        prog "test_ckpttool (1 rank, ASan/UBSan)" "$T/asan.log" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
            "$TA/test_ckpttool.asan" "$T.asan"
    else fail "build test_ckpttool.asan" "see $T/asan.build.log"; fi
fi

# ---- the command, built as `make tools` builds it (warnings as errors) ----
P=$TA/ptckpt
L=$T/lib
S=$L/run/step_000000003
if ! wait $p_b2; then
    fail "tools/ptckpt builds (-Wall -Wextra -Werror)" "see $T/ptckpt.build.log"
elif [ ! -f "$S/manifest" ] || [ ! -f "$L/f32.safetensors" ]; then
    pass "tools/ptckpt builds (-Wall -Wextra -Werror)"
    fail "ptckpt" "no checkpoint $S or export from test_ckpttool (it failed above)"
else
    pass "tools/ptckpt builds (-Wall -Wextra -Werror)"
    expect "ptckpt with bad usage exits 2" 2 "usage: ptckpt" "$T/usage.log" "$P" frobnicate "$L/run"
    expect "ptckpt inspect DIR: the step of latest" 0 "^step  *3$" "$T/inspect.log" "$P" inspect "$L/run"
    for pat in "layout  *dp=1 tp=1 pp=1" "model  *vocab=60 .*layers=2 width=32 heads=4" "optimizer  *adamw, 3 steps" "rank_00000.bin" \
        "^  wte  *param 64x32  *f32  *1  *8192$" "^  wte  *m  *64x32" "^total param 28 tensors"; do
        if grep -q -e "$pat" "$T/inspect.log"; then pass "ptckpt inspect shows '$pat'"; else fail "ptckpt inspect shows '$pat'" "$(head -c 600 "$T/inspect.log")"; fi
    done
    expect "ptckpt verify DIR (every step): exit 0" 0 "^OK  .*step_000000003" "$T/verify.log" "$P" verify "$L/run"
    expect "ptckpt export f32" 0 "wrote" "$T/exp.log" "$P" export "$L/run" "$T/f32.safetensors"
    expect "ptckpt export bf16 with moments" 0 "wrote" "$T/expb.log" "$P" export "$S" "$T/bf16m.safetensors" --dtype bf16 --moments
    expect "ptckpt export --dtype f16 refused" 2 "expected f32 or bf16" "$T/expf16.log" "$P" export "$S" "$T/x.safetensors" --dtype f16
    if cmp -s "$T/f32.safetensors" "$L/f32.safetensors"; then pass "the tool's F32 export has the bytes of the library's (checked in test_ckpttool)"
    else fail "the tool's F32 export has the bytes of the library's" "they differ"; fi

    # import: the loss of one forward of the imported checkpoint equals the original's, bit for bit
    expect "ptckpt import of the F32 export" 0 "wrote .*step_000000003" "$T/imp.log" "$P" import "$T/f32.safetensors" "$T/imp"
    "$TA/test_ckpttool" --loss "$L/run" >"$T/loss_ref.log" 2>&1
    "$TA/test_ckpttool" --loss "$T/imp" >"$T/loss_imp.log" 2>&1
    if grep -q '^loss .* bits ' "$T/loss_ref.log" && cmp -s "$T/loss_ref.log" "$T/loss_imp.log"; then pass "imported checkpoint: forward loss bit-identical ($(cat "$T/loss_imp.log"))"
    else fail "imported checkpoint: forward loss bit-identical" "$(cat "$T/loss_ref.log") vs $(cat "$T/loss_imp.log")"; fi
    expect "ptckpt inspect of the import: no optimizer" 0 "optimizer  none" "$T/inspect_imp.log" "$P" inspect "$T/imp"
    # the test hooks exist only with PTRAIN_TEST_HOOKS: the tool, built without, ignores PTRAIN_CKPT_FAIL (its save succeeds)
    expect "a build without PTRAIN_TEST_HOOKS ignores PTRAIN_CKPT_FAIL (ptckpt import saves)" 0 "wrote .*step_000000003" "$T/imp_hooks.log" \
        env PTRAIN_CKPT_FAIL=100 PTRAIN_CKPT_DELAY_MS=100000 "$P" import "$T/f32.safetensors" "$T/imp_hooks"
    expect "... and that checkpoint verifies" 0 "^OK  .*step_000000003" "$T/verify_hooks.log" "$P" verify "$T/imp_hooks"

    # refused imports leave the existing checkpoint as it was
    cp "$T/imp/latest" "$T/latest.before"
    expect "ptckpt import of a truncated file refused" 1 "bad0.safetensors: .*truncated" "$T/imp_bad0.log" "$P" import "$L/bad0.safetensors" "$T/imp" --step 7
    expect "ptckpt import of invalid JSON refused" 1 "not valid safetensors JSON" "$T/imp_bad3.log" "$P" import "$L/bad3.safetensors" "$T/imp" --step 7
    expect "ptckpt import with another width refused, naming the tensor and both shapes" 1 "'wte' has shape \[64, 32\] in .*, \[64, 64\] in the model" \
        "$T/imp_shape.log" "$P" import "$T/f32.safetensors" "$T/imp" --width 64 --step 7
    # a configuration out of range or larger than the file: refused before the model is made (at most
    # 1 GB of address space: the model of such a configuration would need far more)
    for c in "vocab_max:vocab: expected 1..2147483584" "huge:expected at most 2^48 parameters" "layers_many:layers is 1000000 in the metadata: the model's 1000000 blocks need at least 4000002 tensors, the file holds 28" \
        "width_big:width is 1048576 in the metadata, tensor 'wte' has shape \[64, 32\] (expected \[64, 1048576\])" \
        "seq_big:max_seq is 1000000000 in the metadata, tensor 'wpe' has shape \[8, 32\] (expected \[1000000000, 32\])"; do
        expect "ptckpt import of metadata ${c%%:*} refused before anything is allocated" 1 "${c#*:}" "$T/imp_${c%%:*}.log" \
            sh -c 'ulimit -v 1000000 && exec "$@"' sh "$P" import "$L/cfg_${c%%:*}.safetensors" "$T/imp" --step 7
    done
    expect "ptckpt import --width 2147483647 refused (the flags are checked too)" 1 "model configuration heads: expected >= 1, dividing width" \
        "$T/imp_wflag.log" sh -c 'ulimit -v 1000000 && exec "$@"' sh "$P" import "$T/f32.safetensors" "$T/imp" --width 2147483647 --step 7
    expect "ptckpt import --layers 99999999999999999999 refused (out of range)" 2 "expected an integer in 0..2147483647" \
        "$T/imp_lflag.log" "$P" import "$T/f32.safetensors" "$T/imp" --layers 99999999999999999999
    expect "ptckpt import of a file with an extra tensor refused" 1 "'xtra'.*no parameter of the model" "$T/imp_bad7.log" "$P" import "$L/bad7.safetensors" "$T/imp" --step 7
    if [ ! -e "$T/imp/step_000000007" ] && cmp -s "$T/latest.before" "$T/imp/latest" && "$P" verify "$T/imp" >"$T/verify_imp.log" 2>&1; then
        pass "after the refused imports the checkpoint directory is unchanged and verifies"
    else fail "after the refused imports the checkpoint directory is unchanged and verifies" "$(ls "$T/imp") $(cat "$T/verify_imp.log")"; fi

    # a corrupted checkpoint: verify names the file, export fails and leaves the old file
    cp -r "$L/run" "$T/runc"
    printf '\377' | dd of="$T/runc/step_000000003/rank_00000.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
    expect "ptckpt verify of a flipped byte: exit 1 naming the file" 1 "BAD .*rank_00000.bin: CRC32C mismatch" "$T/verify_bad.log" "$P" verify "$T/runc"
    cp "$T/f32.safetensors" "$T/keep.safetensors"
    expect "ptckpt export of the corrupted checkpoint fails" 1 "rank_00000.bin: CRC32C mismatch" "$T/exp_bad.log" "$P" export "$T/runc" "$T/keep.safetensors"
    if cmp -s "$T/f32.safetensors" "$T/keep.safetensors" && [ ! -e "$T/keep.safetensors.tmp" ]; then pass "... and leaves the existing output file as it was"
    else fail "... and leaves the existing output file as it was" "changed or a .tmp left"; fi

    # Python's safetensors, when installed: it reads every export, and writes a file the tool imports
    PY=${PTRAIN_PYTHON:-python3}
    if "$PY" -c 'import safetensors.numpy, numpy' >/dev/null 2>&1; then
        if "$PY" - "$T" "$L" >"$T/py.log" 2>&1 <<'EOF'
import sys
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
t, l = sys.argv[1], sys.argv[2]
for f in [t + "/f32.safetensors", t + "/bf16m.safetensors", l + "/bf16.safetensors", l + "/edge.safetensors"]:
    with safe_open(f, framework="numpy") as s:
        assert s.metadata()["format"] == "pt" and s.metadata()["vocab"] == "60", f
        print(f, len(list(s.keys())), "tensors")
d = load_file(t + "/f32.safetensors")
with safe_open(t + "/f32.safetensors", framework="numpy") as s:
    meta = s.metadata()
assert d["wte"].shape == (64, 32) and str(d["wte"].dtype) == "float32"
save_file(d, t + "/py.safetensors", metadata=meta)
print("ok")
EOF
        then
            pass "Python safetensors reads the exports (F32, BF16, moments) and writes py.safetensors"
            expect "ptckpt import of Python's file" 0 "wrote" "$T/imp_py.log" "$P" import "$T/py.safetensors" "$T/imp_py"
            "$TA/test_ckpttool" --loss "$T/imp_py" >"$T/loss_py.log" 2>&1
            if cmp -s "$T/loss_ref.log" "$T/loss_py.log"; then pass "Python-written import: forward loss bit-identical"
            else fail "Python-written import: forward loss bit-identical" "$(cat "$T/loss_ref.log") vs $(cat "$T/loss_py.log")"; fi
        else fail "Python safetensors reads the exports" "$(tail -n 5 "$T/py.log")"; fi
    else
        echo "NOTE $PY has no safetensors package: the Python round trip is skipped (the spec checks of test_ckpttool stand in)"
    fi
fi

# ---- GPT-2's tokenizer files (vocab.json + merges.txt) -> a ptrain tokenizer, with their ids ----
# a hand-made pair in GPT-2's layout: ids 0..255 the bytes in the order of GPT-2's characters of them
# (printable '!'..'~', 0xA1..0xAC, 0xAE..0xFF as themselves, the other 68 as U+0100..), then 12 merges
# making 256..267, then <|endoftext|> 268 (not the tokenizer's)
if [ -x "$P" ]; then
    G=$T/gpt2tok
    mkdir -p "$G"
    LC_ALL=C awk 'function chr(cp) { if (cp == 34 || cp == 92) return "\\" sprintf("%c", cp); if (cp < 128) return sprintf("%c", cp)
                                     return sprintf("%c%c", 192 + int(cp / 64), 128 + cp % 64) }
        function p(b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 }
        BEGIN { s = "{"; id = 0
            for (b = 0; b < 256; b++) if (p(b)) s = s (id ? ", " : "") "\"" chr(b) "\": " id++
            n = 0; for (b = 0; b < 256; b++) if (!p(b)) s = s ", \"" chr(256 + n++) "\": " id++
            split("Ġt he Ġthe at Ġc Ġcat Ġs Ġsat Ġm Ġmat on Ġon", m, " ")
            for (i = 1; i <= 12; i++) s = s ", \"" m[i] "\": " id++
            print s ", \"<|endoftext|>\": " id "}" }' >"$G/vocab.json"
    printf '#version: 0.2\nĠ t\nh e\nĠt he\na t\nĠ c\nĠc at\nĠ s\nĠs at\nĠ m\nĠm at\no n\nĠ on\n' >"$G/merges.txt"
    expect "ptckpt import vocab.json merges.txt: a tokenizer of 256 bytes + 12 merges" 0 "12 merges = vocabulary 268" "$G/imp.log" \
        "$P" import "$G/vocab.json" "$G/merges.txt" "$G/tok.bin"
    printf 'the cat sat on the mat\n\303\251\n' >"$G/want.txt"
    "$P" encode "$G/tok.bin" "$(printf 'the cat sat on the mat\n\303\251')" >"$G/enc.log" 2>&1
    # GPT-2's ids: "t" 83, "he" 257, " cat" 261, " sat" 263, " on" 267, " the" 258, " mat" 265, "\n" 198, 0xC3 127, 0xA9 102
    if [ "$(head -n 1 "$G/enc.log")" = "83 257 261 263 267 258 265 198 127 102" ] && tail -n +2 "$G/enc.log" | cmp -s - "$G/want.txt"; then
        pass "ptckpt encode with it: GPT-2's ids (83 257 261 ...), and they decode to the text"
    else fail "ptckpt encode with GPT-2's files" "$(head -c 300 "$G/enc.log")"; fi
    # malformed files: refused naming the file, the line and what was expected
    sed '4s/.*/h e x/' "$G/merges.txt" >"$G/m_bad.txt"
    expect "merges.txt with a line of three parts refused, naming the line" 1 'm_bad.txt line 4: expected a merge "LEFT RIGHT" (two tokens, one space between), found "h e x"' \
        "$G/bad1.log" "$P" import "$G/vocab.json" "$G/m_bad.txt" "$G/x.bin"
    sed -e '3{h;d}' -e '4G' "$G/merges.txt" >"$G/m_order.txt"
    expect "merges.txt out of vocab.json's order refused, naming the line and the ids" 1 \
        'm_order.txt line 3: the merge "Ġt he" (merge 1): the token it makes, "Ġthe" has id 258 in .*vocab.json, expected id 257' "$G/bad2.log" \
        "$P" import "$G/vocab.json" "$G/m_order.txt" "$G/x.bin"
    sed 's/, "Ġs": 262/, "Ġs" 262/' "$G/vocab.json" >"$G/v_colon.json"
    expect "a vocab.json that is not JSON refused, naming where" 1 "v_colon.json: expected ':' after the key, found '2' at byte 2695" "$G/bad3.log" \
        "$P" import "$G/v_colon.json" "$G/merges.txt" "$G/x.bin"
    sed 's/"Ġcat": 261/"Ġcat": "261"/' "$G/vocab.json" >"$G/v_str.json"
    expect "a vocab.json id that is no integer refused, naming the token" 1 'v_str.json line 1, column [0-9]*: token "Ġcat": expected an id' "$G/bad4.log" \
        "$P" import "$G/v_str.json" "$G/merges.txt" "$G/x.bin"
    if [ ! -e "$G/x.bin" ]; then pass "... and none of them wrote a file"; else fail "refused imports" "wrote $G/x.bin"; fi
    # a checkpoint imported with --tokenizer carries it; one whose model has fewer ids than the tokenizer is refused
    expect "ptckpt import --tokenizer of a model of vocabulary 60 refused (the tokenizer has 268 ids)" 1 \
        "the tokenizer's vocabulary of 268 exceeds the model's vocab of 60" "$G/imp_tok.log" "$P" import "$T/f32.safetensors" "$G/ck" --tokenizer "$G/tok.bin"
fi

# ---- dp2 x tp2 with ZeRO-1: shards, ranges and the tied embedding assembled ----
if have_mpi; then
    if wait $p_b3; then
        prog "mpirun -np 4 test_ckpttool (dp2 x tp2, ZeRO-1)" "$T/np4.log" mpi_run 4 -x CKT_TP=2 -- "$TA/test_ckpttool_mpi" "$T.mpi"
        if [ -f "$T.mpi/run/latest" ] && [ -x "$T/ptckpt" ]; then
            expect "ptckpt inspect of the dp2 x tp2 checkpoint: wte in 2 TP pieces" 0 "^  wte  *param 64x32  *f32  *2 " "$T/inspect4.log" "$P" inspect "$T.mpi/run"
            expect "ptckpt verify of the dp2 x tp2 checkpoint (4 files)" 0 "4 data files" "$T/verify4.log" "$P" verify "$T.mpi/run/step_000000003"
        fi
    else fail "build test_ckpttool_mpi" "see $T/mpi.build.log"; fi
fi

rm -rf "$T.asan" "$T.mpi"
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
