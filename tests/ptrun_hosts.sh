# tests/ptrun_hosts.sh - sourced by tests/ptrun_test.sh where namespaces can be made: the host trial.
# Two namespace hosts (tests/nshosts.sh, state and subnet of their own), 2 slots each: dp 2 x pp 2
# across them under ptrun. At step 4 (every rank slowed by 200 ms a step until then, so the kill lands
# mid-run) host 2 is killed outright and cut off: ptrun notices within 2 s of the kill, tears down,
# finds host 2 not answering its probe, and relaunches as dp 1 x pp 2 with accum 2 on host 1. Host 2
# is then restored; a second fault (rank 0 killed at step 9) makes ptrun probe again, find host 2
# answering, and grow back to dp 2. The run finishes with exit 0, per-step losses within 1e-5 relative
# of the uninterrupted run, and no process left on either host.
# Uses from the caller: W, PTRUN, PTH, SMALL, check, pass, fail, close_losses, left.
NSS=/run/ptrain-nshosts-ptrun
nsh() { NSHOSTS_STATE=$NSS sh tests/nshosts.sh "$@"; }
trap 'nsh down >/dev/null 2>&1' EXIT INT TERM
nsh down >/dev/null 2>&1
if ! nsh up 2 --net 10.213.5 --prefix ptr --bridge ptbr5 >"$W/hosts.up" 2>&1; then
    fail "namespace hosts: up 2" "$(tail -n 3 "$W/hosts.up")"
else
    mkdir -p "$W/host"
    nsh hostfile 2 >"$W/host/hosts"
    margs=""
    for a in $(nsh mpirun-args); do margs="$margs --mpi-arg $a"; done
    PTRAIN_FAULT=slow:200:0:*,kill:9:0 timeout -k 5 240 "$PTRUN" --max-restarts 3 --backoff 0.2 --timeout-floor 5 --probe-timeout 3 \
        --hosts "$W/host/hosts" --advertise 10.213.5.1 $margs -- "$PTH" $SMALL --ckpt-dir "$W/host/ck" --log "$W/host/log.jsonl" \
        >"$W/host.out" 2>"$W/host.err" &
    pid=$!
    i=0
    while [ $i -lt 600 ] && ! grep -q "^step 3 " "$W/host.out" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
    tkill=$(date +%s.%N)
    nsh kill ptr2 >"$W/host.kill" 2>&1
    nsh cut ptr2 >>"$W/host.kill" 2>&1
    i=0
    while [ $i -lt 900 ] && ! grep -q "^ptrun: relaunch 2" "$W/host.err" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    nsh restore ptr2 >>"$W/host.kill" 2>&1
    wait $pid
    rc=$?
    check "host kill: ptrun ends by itself with exit 0 across 2 namespace hosts" $rc "exit $rc; $(grep '^ptrun' "$W/host.err" | tail -n 6)"
    tdet=$(grep '"event":"ptrun_detected"' "$W/host/ck/ptrun_events.jsonl" | head -n 1 | sed -n 's/.*"wall":\([0-9.]*\).*/\1/p')
    lat=$(awk -v a="${tdet:-0}" -v b="$tkill" 'BEGIN { printf "%.2f", a - b }')
    awk -v l="$lat" 'BEGIN { exit !(l >= 0 && l <= 2) }'
    check "host kill: noticed ${lat} s after every process of host 2 was killed (at most 2 s)" $? "$(grep -m1 '^ptrun: \(death\|failure\|hang\)' "$W/host.err")"
    grep -q "host 10.213.5.12 does not answer" "$W/host.err" && grep -q "dp 2 -> 1, accum 1 -> 2" "$W/host.err"
    check "host kill: host 2 does not answer the probe; relaunched as dp 1 x pp 2, accum 2, on host 1" $? "$(grep '^ptrun' "$W/host.err" | head -n 12)"
    grep -q "host 10.213.5.12 answers again" "$W/host.err" && grep -q "dp 1 -> 2, accum 2 -> 1" "$W/host.err"
    check "host kill: host 2 restored answers the next probe; grown back to dp 2" $? "$(grep '^ptrun: \(restart\|host\)' "$W/host.err")"
    close_losses host
    sleep 0.5
    l1=$(nsh pids ptr1 | wc -l)
    l2=$(nsh pids ptr2 | wc -l)
    [ "$l1" -eq 0 ] && [ "$l2" -eq 0 ] && [ "$(left "$W/host/ck")" -eq 0 ]
    check "host kill: no process of the job is left on either host ($l1, $l2)" $?
fi
nsh down >"$W/hosts.down" 2>&1
check "namespace hosts: torn down, nothing left" $? "$(cat "$W/hosts.down")"
trap - EXIT INT TERM
