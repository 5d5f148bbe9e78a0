#!/bin/sh
# bench/bench_recovery.sh [BUILD_DIR] - the supervisor's recovery, one JSON line per fault kind (make copies it to
# build/bench_recovery, which finds build/ptrun and build/pttrain-hooks beside itself):
#   {"bench":"recovery","fault":"kill","detect_s":...,"teardown_s":...,"recover_s":...,"steps_lost":...,"timeout_s":...}
# The tutorial GPT (03's default: 4 layers, width 256, 8 heads, 16 x 256 tokens) on 4 ranks, dp 2 x pp 2, under
# build/ptrun with a fault of PTRAIN_FAULT (build/pttrain-hooks) at step RECOVERY_STEP (default 6) on rank 1;
# checkpoints every 4 steps. detect_s: from the fault's own timestamp (the rank's, sent before it strikes) to
# ptrun's detection; recover_s: from the fault to the first step completed after the relaunch; steps_lost: steps
# done again. Hangs are timed out after max(RECOVERY_FLOOR (default 5) s, 5 x the longest step seen): timeout_s.
# Targets: detection <= 2 s for a death, <= the timeout + 1 s for a hang; recovery <= 30 s.
# RECOVERY_FAULTS (default "kill exit hang stop crash-in-save") narrows it.
set -u
B=${1:-$(dirname "$0")}
W=${TMPDIR:-/tmp}/ptrain_bench_recovery.$$
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
S=${RECOVERY_STEP:-6}
FLOOR=${RECOVERY_FLOOR:-5}
rc=0
for k in ${RECOVERY_FAULTS:-kill exit hang stop crash-in-save}; do
    rm -rf "$W"
    mkdir -p "$W"
    step=$S
    [ "$k" = crash-in-save ] && step=8 # the checkpoint of step 8 (every 4 steps)
    PTRAIN_FAULT=$k:$step:1 timeout 600 "$B/ptrun" --max-restarts 1 --backoff 0 --timeout-floor "$FLOOR" --mpi-arg --oversubscribe -- \
        "$B/pttrain-hooks" --dp 2 --pp 2 --steps $((S + 6)) --val-every 0 --sample 0 --ckpt-dir "$W/ck" --ckpt-every 4 >"$W/out" 2>"$W/err"
    r=$?
    ev=$W/ck/ptrun_events.jsonl
    num() { grep "\"event\":\"$1\"" "$ev" 2>/dev/null | head -n 1 | sed -n "s/.*\"$2\":\([0-9.eE+-]*\).*/\1/p"; }
    det=$(num ptrun_detected latency_s)
    td=$(num ptrun_teardown seconds)
    rec=$(num ptrun_recovered recover_s)
    lost=$(num ptrun_recovered steps_lost)
    to=$(sed -n 's/.*(the timeout of phase [a-z]*: \([0-9.]*\) s).*/\1/p' "$W/err" | head -n 1)
    if [ $r -ne 0 ] || [ -z "$det" ] || [ -z "$rec" ]; then
        echo "bench recovery: $k: ptrun exit $r; $(grep '^ptrun' "$W/err" | tail -n 3)" >&2
        rc=1
        continue
    fi
    echo "{\"bench\":\"recovery\",\"fault\":\"$k\",\"ranks\":4,\"layout\":\"dp2xpp2\",\"detect_s\":$det,\"teardown_s\":${td:-null},\"recover_s\":$rec,\"steps_lost\":${lost:-null},\"timeout_s\":${to:-null}}"
done
rm -rf "$W"
exit $rc
