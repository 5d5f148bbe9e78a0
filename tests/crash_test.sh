#!/bin/sh
# tests/crash_test.sh [BUILD_DIR] - crash consistency of checkpoints (>>ckpt). tests/crash_run.c
# trains a tiny GPT and saves after every step (keep_last 2; every third step saved twice, the second
# save replacing the first); 50 trials (CRASH_TRIALS) kill -9 it at a random moment (seeded:
# CRASH_SEED, printed; uniform over the save loop, whose time is mostly saves) on 1 rank or, every
# third trial, on 4 ranks under mpirun (every rank killed at once; dp4 with ZeRO-1), with synchronous,
# asynchronous (writes held PTRAIN_CKPT_DELAY_MS=15 ms in flight) or mixed saves. After each kill:
# the checkpoint latest names (or, mid-replacement, its .old.step_K) verifies and holds that step,
# the retention window (steps K-1 and K) is there and verifies, `ptckpt verify` passes on every
# step_* directory, and resuming from latest on the same layout gives per-step losses and final
# parameters bit-identical to an uninterrupted run (done once per layout). Prints a table: trial,
# ranks, mode, kill time, latest step, verified steps, resume bit-identical. (crash_run --stats, the
# statistics read while the writer runs, is run by tests/tsan_test.sh under ThreadSanitizer.)
# Prints PASS/FAIL lines and "N passed, N failed"; ~1 minute.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/mpi_lib.sh
export PTRAIN_THREADS=1 OMP_WAIT_POLICY=passive PTRAIN_CKPT_DELAY_MS=15
C=$BUILD/crash
rm -rf "$C"
mkdir -p "$C"
case $C in /*) CA=$C ;; *) CA=./$C ;; esac
SEED=${CRASH_SEED:-$(date +%s)}
TRIALS=${CRASH_TRIALS:-50}
NSTEPS=16
echo "crash_test: $TRIALS trials, seed $SEED (CRASH_SEED=$SEED repeats them), $NSTEPS steps, a save after each"

# the programs, built in parallel (each compiles the implementation itself, with $PT_OWN)
($CC $W $PT_OWN -O1 -fopenmp tests/crash_run.c -o "$C/crash_run" -lm >"$C/build1.log" 2>&1 && echo ok >"$C/build1") &
(have mpicc && mpicc $W $PT_OWN -O1 -fopenmp -DPTRAIN_MPI tests/crash_run.c -o "$C/crash_run_mpi" -lm >"$C/build4.log" 2>&1 && echo ok >"$C/build4") &
wait
(build_prog "$C/ptckpt" tools/ptckpt.c tool+posix >"$C/buildp.log" 2>&1 && echo ok >"$C/buildp") &
wait
for b in 1 4 p; do
    if [ ! -f "$C/build$b" ]; then
        fail "build ($b)" "$(head -c 600 "$C/build$b.log")"
        echo "$NP passed, $NF failed"
        exit 1
    fi
done

# launch NP TRIAL ARGS...: crash_run on NP ranks (in the foreground; callers add &)
launch() {
    _np=$1
    shift
    if [ "$_np" = 1 ]; then "$CA/crash_run" "$@"
    else mpi_run -t 60 "$_np" -x PTRAIN_CKPT_DELAY_MS -- "$CA/crash_run_mpi" "$@"; fi
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# the references (no saves), and how long a run with saves takes on each layout and mode (the kill
# window: from the first step, which the script sees as TRIAL/started, to the end)
wins=""
for np in 1 4; do
    launch "$np" "$C/ref$np" "$NSTEPS" none >"$C/ref$np.log" 2>&1 </dev/null
    for mode in sync async mix; do
        W=$C/win$np$mode
        mkdir -p "$W"
        launch "$np" "$W" "$NSTEPS" "$mode" >"$W.log" 2>&1 </dev/null &
        pid=$!
        while [ ! -f "$W/started" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
        t0=$(now_ms)
        wait "$pid"
        eval "WIN_${np}_$mode=$(($(now_ms) - t0))"
        wins="$wins $np/$mode $(($(now_ms) - t0)) ms,"
        if grep -q '^hash' "$C/ref$np.log" && cmp -s "$C/ref$np.log" "$W.log"; then
            pass "reference run on $np rank(s); $mode saves do not change the losses"
        else fail "reference run on $np rank(s), $mode saves" "$(tail -n 3 "$C/ref$np.log" "$W.log")"; fi
    done
done
echo "kill windows (ranks/mode):$wins"
awk -v s="$SEED" -v n="$TRIALS" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%.4f\n", rand() }' >"$C/rand"

TAB=$C/table
printf '%-5s %-5s %-5s %-9s %-6s %-16s %s\n' trial ranks mode kill_ms latest verified bit-identical >"$TAB"
i=0
t_start=$(date +%s)
while [ "$i" -lt "$TRIALS" ]; do
    np=1
    [ $((i % 3)) -eq 2 ] && np=4
    mode=$(echo "sync async mix" | cut -d' ' -f$(((i + i / 3) % 3 + 1)))
    T=$C/t$i
    mkdir -p "$T"
    frac=$(sed -n "$((i + 1))p" "$C/rand")
    eval "win=\$WIN_${np}_$mode"
    kms=$(awk -v f="$frac" -v w="$win" 'BEGIN { printf "%d", f * w * 0.8 }')
    launch "$np" "$T" "$NSTEPS" "$mode" >"$T/run.log" 2>&1 </dev/null &
    pid=$!
    w=0
    while [ ! -f "$T/started" ] && [ "$w" -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 0.01
        w=$((w + 1))
    done
    sleep "$(awk -v k="$kms" 'BEGIN { printf "%.3f", k / 1000 }')"
    # shellcheck disable=SC2046
    kill -9 $(cat "$T"/pid.* 2>/dev/null) 2>/dev/null
    wait "$pid" 2>/dev/null
    grep -q '^hash' "$T/run.log" && kms="$kms(done)"
    why=""
    "$CA/crash_run" --check "$T" >"$T/check.log" 2>&1 || why="check: $(grep FAIL "$T/check.log" | head -n 2)"
    latest=$(awk '$1 == "latest" { print $2 }' "$T/check.log")
    ok_steps=""
    if ls -d "$T"/ckpt/step_* >/dev/null 2>&1; then
        "$CA/ptckpt" verify "$T/ckpt" >"$T/verify.log" 2>&1 || why="$why ptckpt verify: $(grep -v '^OK' "$T/verify.log" | head -n 2)"
        ok_steps=$(sed -n 's|^OK .*step_0*\([0-9][0-9]*\) .*|\1|p' "$T/verify.log" | sort -n | tr '\n' ',' | sed 's/,$//')
    fi
    launch "$np" "$T" "$NSTEPS" "$mode" resume >"$T/resume.log" 2>&1 </dev/null
    start=$(awk '$1 == "start" { print $2 }' "$T/resume.log")
    same=no
    if [ -n "$start" ]; then
        awk -v k="$start" '($1 == "loss" && $2 > k) || $1 == "hash"' "$C/ref$np.log" >"$T/want"
        grep -E '^(loss|hash) ' "$T/resume.log" >"$T/got"
        cmp -s "$T/want" "$T/got" && same=yes
    fi
    [ "$same" = yes ] || why="$why resume from ${start:-?} not bit-identical: $(tail -n 2 "$T/resume.log")"
    if [ "${latest:--1}" -ge 0 ] && [ "$start" != "$latest" ]; then why="$why resumed from step $start, latest names $latest"; fi
    printf '%-5s %-5s %-5s %-9s %-6s %-16s %s\n' "$i" "$np" "$mode" "$kms" "${latest:-?}" "${ok_steps:--}" "$same" >>"$TAB"
    if [ -z "$why" ]; then
        pass "trial $i: $np rank(s), $mode, kill -9 at $kms ms: latest step ${latest:-?} valid, window there, resume bit-identical"
        rm -rf "$T"
    else fail "trial $i: $np rank(s), $mode, kill -9 at $kms ms" "$why"; fi
    i=$((i + 1))
done
cat "$TAB"
echo "trials took $(($(date +%s) - t_start)) s"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
