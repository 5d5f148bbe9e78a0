#!/bin/sh
# tests/ptrun_test.sh [BUILD_DIR] - the supervisor's trials (tools/ptrun): one trial of each fault kind of
# PTRAIN_FAULT on dp 2 x pp 2 of a small GPT on this host, a shrink (slots taken out of the hostfile), the
# lease, a stop by signal, the refusals, and (where namespaces can be made: tests/nshosts.sh) a host kill
# on namespace hosts. Each trial under ptrun must end by itself with exit 0; a recovery on the same layout
# gives final checkpoint files (parameters, moments, data position) byte-identical to an uninterrupted
# run; one on a shrunk DP gives per-step losses within 1e-5 relative of it; slow reports a straggler and
# does not restart; no process of the job is left afterwards. Ends with "N passed, N failed".
set -u
BUILD=${1:-build/tests}
W=$BUILD/ptrun
rm -rf "$W"
mkdir -p "$W"
W=$(cd "$W" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
unset PTRAIN_FAULT PTRAIN_SUPERVISOR
P=0 F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; F=$((F + 1)); }
check() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1" "${3:-}"; fi; }

make --no-print-directory build/ptrun build/pttrain-hooks >"$W/build.log" 2>&1 || { fail "make build/ptrun build/pttrain-hooks" "$(tail -n 5 "$W/build.log")"; echo "$P passed, $F failed"; exit 1; }
PTRUN=$(pwd)/build/ptrun
PTH=$(pwd)/build/pttrain-hooks
SMALL="--dp 2 --pp 2 --layers 2 --width 32 --heads 2 --seq 32 --batch 8 --steps 12 --val-every 0 --sample 0 --ckpt-every 4"
# the supervisor's flags of every trial: hangs timed out after 3 s, relaunches 0.2 s after a failure
SUP="--max-restarts 2 --backoff 0.2 --timeout-floor 3 --mpi-arg --oversubscribe"

# processes of a trial still running (its checkpoint directory is in their command line)
left() { pgrep -f -- "$1" 2>/dev/null | grep -v "^$$\$" | wc -l; }
# losses of a run's stdout: "step loss" of the last line of each step (a replayed step counts as the last run of it)
losses() { grep '^step ' "$1" | awk '{ l[$2] = $4 } END { for (s in l) print s, l[s] }' | LC_ALL=C sort; }

# ---- the uninterrupted run: the reference ----
mpirun --oversubscribe -np 4 "$PTH" $SMALL --ckpt-dir "$W/ref/ck" >"$W/ref.out" 2>&1
check "reference run (dp 2 x pp 2, 12 steps, no supervisor)" $? "$(tail -n 5 "$W/ref.out")"
losses "$W/ref.out" >"$W/ref.loss"

# trial NAME FAULT [ptrun flags...]: a supervised run with PTRAIN_FAULT=FAULT; stdout, stderr in W/NAME.*
trial() {
    n=$1 f=$2
    shift 2
    mkdir -p "$W/$n"
    PTRAIN_FAULT=$f timeout 180 "$PTRUN" $SUP "$@" -- "$PTH" $SMALL --ckpt-dir "$W/$n/ck" --log "$W/$n/log.jsonl" >"$W/$n.out" 2>"$W/$n.err"
    rc=$?
    check "$n: ptrun ends by itself with exit 0 (PTRAIN_FAULT=$f)" "$rc" "exit $rc; $(grep '^ptrun' "$W/$n.err" | tail -n 4)"
    sleep 0.3
    check "$n: no process of the job is left" "$(left "$W/$n/ck")" "$(pgrep -af -- "$W/$n/ck" | head -n 3)"
}
# same NAME: the final checkpoint is byte-identical to the reference's
same() {
    d=0
    for x in "$W/ref/ck/step_000000012/"*; do cmp -s "$x" "$W/$1/ck/step_000000012/$(basename "$x")" || d=$((d + 1)); done
    check "$1: final checkpoint (every rank's parameters, moments, data position) byte-identical to the uninterrupted run's" "$d" "$d files differ"
}
# close_losses NAME: each of the 12 steps' loss (its last run) within 1e-5 relative of the uninterrupted run's
close_losses() {
    losses "$W/$1.out" >"$W/$1.loss"
    bad=$(LC_ALL=C join "$W/ref.loss" "$W/$1.loss" | awk '{ d = $2 - $3; if (d < 0) d = -d; if (d > 1e-5 * ($2 < 0 ? -$2 : $2)) n++ } END { print n + 0 }')
    n=$(LC_ALL=C join "$W/ref.loss" "$W/$1.loss" | wc -l)
    [ "$n" -eq 12 ] && [ "$bad" -eq 0 ]
    check "$1: all 12 per-step losses within 1e-5 relative of the uninterrupted run's ($bad of $n off)" $?
}
restarted() { grep -q "^ptrun: restart 1/2 after " "$W/$1.err"; check "$1: one restart ($2)" $? "$(grep '^ptrun' "$W/$1.err" | head -n 8)"; }

for k in kill exit hang stop; do
    trial "$k" "$k:6:1"
    restarted "$k" "$(grep -m1 '^ptrun: \(death\|hang\)' "$W/$k.err" | cut -c1-120)"
    same "$k"
done
# how each was noticed: a death within 2 s of the fault, a hang within the timeout (3 s) + 1 s
for k in kill exit hang stop; do
    lat=$(sed -n 's/^ptrun: detected \([0-9.]*\) s after the fault$/\1/p' "$W/$k.err" | head -n 1)
    lim=2
    case $k in hang | stop) lim=4 ;; esac
    awk -v l="${lat:-99}" -v m="$lim" 'BEGIN { exit !(l <= m) }'
    check "$k: detected ${lat:-?} s after the fault's own timestamp (at most $lim s)" $?
done
grep -q "rank 1 in no MPI call (stuck in its own code?) while ranks .* wait in MPI" "$W/hang.err"
check "hang: the hung rank is named (in no MPI call while the others wait in MPI)" $? "$(grep '^ptrun: hang' "$W/hang.err")"
grep -q "beats no more" "$W/stop.err"
check "stop: the stopped rank is named (its beats stopped)" $? "$(grep '^ptrun: hang' "$W/stop.err")"

trial crash crash-in-save:8:2
restarted crash "died while writing the checkpoint of step 8"
grep -q "resuming from step 4" "$W/crash.err"
check "crash-in-save: resumes from step 4, the newest complete checkpoint (step 8's was cut off)" $? "$(grep '^ptrun: restart' "$W/crash.err")"
same crash

trial slow slow:300:3:1
grep -q "^ptrun: straggler: rank 1 " "$W/slow.err"
check "slow: rank 1 reported as a straggler" $? "$(grep '^ptrun' "$W/slow.err" | head -n 5)"
! grep -q "^ptrun: restart" "$W/slow.err"
check "slow: no restart" $?
same slow

# the shrink: the hostfile loses 2 of its 4 slots while the job runs; dp 2 -> 1, accum 1 -> 2
mkdir -p "$W/shrink"
echo "localhost slots=4" >"$W/shrink/hosts"
PTRAIN_FAULT=kill:6:3 timeout 180 "$PTRUN" $SUP --hosts "$W/shrink/hosts" -- "$PTH" $SMALL --ckpt-dir "$W/shrink/ck" --log "$W/shrink/log.jsonl" \
    >"$W/shrink.out" 2>"$W/shrink.err" &
pid=$!
i=0
while [ $i -lt 300 ] && ! grep -q "^ptrun: launch 1" "$W/shrink.err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
echo "localhost slots=2 # two slots taken away" >"$W/shrink/hosts"
wait $pid
rc=$?
check "shrink: ptrun ends by itself with exit 0" $rc "$(grep '^ptrun' "$W/shrink.err" | tail -n 4)"
grep -q "dp 2 -> 1, accum 1 -> 2" "$W/shrink.err"
check "shrink: relaunched on the 2 slots left as dp 1 x pp 2 with accum 2 (the global batch kept)" $? "$(grep '^ptrun: restart' "$W/shrink.err")"
close_losses shrink
sleep 0.3
check "shrink: no process of the job is left" "$(left "$W/shrink/ck")"

# the events: in ptrun's own file and, at the end, in the trainer's log (ptreport draws them)
for e in ptrun_launch ptrun_fault ptrun_detected ptrun_teardown ptrun_relaunch ptrun_recovered ptrun_end; do
    grep -q "\"event\":\"$e\"" "$W/kill/log.jsonl"
    check "kill: the run log holds a $e event" $?
done
grep -q '"latency_s":' "$W/kill/ck/ptrun_events.jsonl"
check "kill: the detection's latency is in the events file" $?

# the lease: ptrun killed outright; the ranks hear nothing and end themselves within the lease (2 s)
mkdir -p "$W/lease"
"$PTRUN" $SUP --lease 2 -- "$PTH" $SMALL --steps 400 --ckpt-dir "$W/lease/ck" >"$W/lease.out" 2>"$W/lease.err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "^step 3 " "$W/lease.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid
t0=$(date +%s)
i=0
while [ $i -lt 100 ] && [ "$(pgrep -f -- "$W/lease/ck" | wc -l)" -gt 0 ]; do sleep 0.1; i=$((i + 1)); done
gone=$(($(date +%s) - t0))
check "lease: with ptrun killed, every rank ends itself (after ${gone} s; lease 2 s)" "$(left "$W/lease/ck")" "$(pgrep -af -- "$W/lease/ck" | head -n 3)"
grep -q "its lease ran out" "$W/lease.err"
check "lease: a rank says its lease ran out" $? "$(tail -n 3 "$W/lease.err")"
pkill -9 -f -- "$W/lease/ck" 2>/dev/null

# a stop: SIGTERM to ptrun; the ranks save and stop; exit 128 + 15
mkdir -p "$W/term"
timeout 120 "$PTRUN" $SUP -- "$PTH" $SMALL --steps 400 --ckpt-dir "$W/term/ck" >"$W/term.out" 2>"$W/term.err" &
pid=$!
i=0
while [ $i -lt 600 ] && ! grep -q "^step 2 " "$W/term.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid
wait $pid
rc=$?
[ "$rc" -eq 143 ] && grep -q "^interrupted at step" "$W/term.out" && [ -f "$W/term/ck/latest" ]
check "SIGTERM to ptrun: the ranks save and stop, ptrun exits 143" $? "exit $rc; $(tail -n 3 "$W/term.out")"
sleep 0.3
check "SIGTERM: no process of the job is left" "$(left "$W/term/ck")"

# refusals: no checkpoint directory; a malformed PTRAIN_FAULT (a hooks build names it)
"$PTRUN" -- "$PTH" $SMALL >"$W/nockpt.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "has no --ckpt-dir" "$W/nockpt.out"
check "a trainer command without --ckpt-dir is refused, saying why" $? "exit $rc: $(cat "$W/nockpt.out")"
PTRAIN_FAULT=explode:3:1 "$PTH" --steps 2 --layers 1 --width 16 --heads 1 --seq 16 --batch 2 --sample 0 >"$W/badfault.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "PTRAIN_FAULT='explode:3:1': expected KIND:STEP:RANK" "$W/badfault.out"
check "a malformed PTRAIN_FAULT is refused, naming it and the syntax" $? "exit $rc: $(tail -n 2 "$W/badfault.out")"
# a job that fails before its first step is a configuration error: reported, not restarted (exit 1)
mkdir -p "$W/cfg"
PTRAIN_FAULT=explode:3:1 timeout 120 "$PTRUN" $SUP -- "$PTH" $SMALL --ckpt-dir "$W/cfg/ck" >"$W/cfg.out" 2>"$W/cfg.err"
rc=$?
[ $rc -eq 1 ] && grep -q "^ptrun: the job failed before its first step" "$W/cfg.err" && ! grep -q "^ptrun: relaunch" "$W/cfg.err"
check "a job failing before its first step (bad PTRAIN_FAULT) is not restarted: exit 1" $? "exit $rc: $(grep '^ptrun' "$W/cfg.err" | tail -n 3)"
# the restart budget: --max-restarts 0 and a kill -> it gives up with a report, exit 1
mkdir -p "$W/budget"
PTRAIN_FAULT=kill:2:0 timeout 120 "$PTRUN" --max-restarts 0 --backoff 0.2 --mpi-arg --oversubscribe -- "$PTH" $SMALL --ckpt-dir "$W/budget/ck" \
    >"$W/budget.out" 2>"$W/budget.err"
rc=$?
[ $rc -eq 1 ] && grep -q "^ptrun: the restart budget (0) is spent" "$W/budget.err" && grep -q "^ptrun: gave up: 1 failure(s), 0 restart(s)" "$W/budget.err"
check "the restart budget spent: ptrun gives up with its report, exit 1" $? "exit $rc: $(grep '^ptrun' "$W/budget.err" | tail -n 3)"
sleep 0.3
check "budget: no process of the job is left" "$(left "$W/budget/ck")"
# a build without the test hooks ignores PTRAIN_FAULT
if [ -x build/03_gpt ] || make --no-print-directory build/03_gpt >"$W/03.build.log" 2>&1; then
    PTRAIN_FAULT=kill:1:0 ./build/03_gpt --steps 3 --layers 1 --width 16 --heads 1 --seq 16 --batch 2 >"$W/nohooks.out" 2>&1
    check "a build without PTRAIN_TEST_HOOKS (03_gpt) ignores PTRAIN_FAULT=kill:1:0" $? "$(tail -n 3 "$W/nohooks.out")"
else fail "build build/03_gpt" "$(tail -n 3 "$W/03.build.log")"; fi

# ---- hosts as namespaces: a host killed outright ----
NS=tests/nshosts.sh
if [ ! -f "$NS" ]; then
    echo "SKIP host kill: $NS is missing"
elif ! sh "$NS" check >"$W/ns.check" 2>&1; then
    echo "SKIP host kill on namespace hosts: $(cat "$W/ns.check") (the trials above ran on this host only)"
else
    . tests/ptrun_hosts.sh
fi

echo "$P passed, $F failed"
[ "$F" -eq 0 ]
