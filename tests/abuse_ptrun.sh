#!/bin/sh
# tests/abuse_ptrun.sh [BUILD_DIR] - ptrun's channel (tools/ptrun) under attack: a stranger at a second
# loopback address (127.0.0.2) connects to the port the ranks report to, as docs/fault-tolerance.md's
# threat model describes, and an insider who knows the run's secret sends lines with bad fields.
#   A. a real job (one rank of build/pttrain-hooks) while forged hellos without the secret come in:
#      a host of `x;id>FILE;#` (a shell command at teardown), the pid of an unrelated sleep (killed
#      at teardown), one held open without a goodbye (the finished job counted as failed), a host and
#      a fault kind carrying `","rank":99,"x":"y` (keys forged in the events), a line that is not a
#      hello; and a connection to this machine's non-loopback address.
#   B. a launcher stand-in (--mpirun: a script that writes its environment and waits) and a client
#      with the run's secret: hellos with a bad field each, then a hello of an unrelated sleep's pid
#      and lines with bad fields, then a close without a goodbye (ptrun tears the "job" down).
#   C. a job on a machine whose name does not resolve (a UTS namespace, unshare -u): the ranks dial
#      127.0.0.1, not the name.
# Checks `abuse 1:` .. `abuse 5:` (the items of ptrun's channel in the hardening list); each fails on
# the ptrun before the channel had a secret. PTRUN=FILE runs them against another ptrun binary.
# Prints PASS/FAIL lines, then "N passed, N failed" (exit 1 if any failed). About 10 s.
set -u
BUILD=${1:-build/tests}
W=$BUILD/abuse_ptrun
rm -rf "$W"
mkdir -p "$W"
W=$(cd "$W" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
unset PTRAIN_FAULT PTRAIN_SUPERVISOR PTRAIN_SUPERVISOR_SECRET PTRAIN_SUPERVISOR_ID
P=0 F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; F=$((F + 1)); }
check() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1" "${3:-}"; fi; }
finish() {
    echo "$P passed, $F failed"
    [ "$F" -eq 0 ]
    exit
}

if ! command -v python3 >/dev/null 2>&1; then
    fail "python3" "the attack client is a python3 script; install python3"
    finish
fi
if [ -z "${PTRUN:-}" ]; then
    make --no-print-directory build/ptrun build/pttrain-hooks >"$W/build.log" 2>&1 || {
        fail "make build/ptrun build/pttrain-hooks" "$(tail -n 5 "$W/build.log")"
        finish
    }
    PTRUN=$(pwd)/build/ptrun
fi
PTH=$(pwd)/build/pttrain-hooks
[ -x "$PTH" ] || make --no-print-directory build/pttrain-hooks >"$W/build.log" 2>&1 || {
    fail "make build/pttrain-hooks" "$(tail -n 5 "$W/build.log")"
    finish
}
TINY="--dp 1 --layers 1 --width 16 --heads 1 --seq 16 --batch 2 --val-every 0 --sample 0"

PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    pkill -9 -f -- "$W/" 2>/dev/null
}
trap cleanup EXIT INT TERM

# the attack client: python3 CLIENT MODE ...; writes a JSON report
cat >"$W/client.py" <<'EOF'
import json, os, select, socket, sys, time

def conn(port, src="127.0.0.2", dst="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(2)
    s.connect((dst, port))
    s.setblocking(False)
    return s

def send(s, text):
    try:
        s.sendall(text.encode("latin-1"))
    except OSError:
        pass

def watch(socks, seconds, stop=None):
    """{name: seconds until the peer closed it, or None while open} after `seconds` (or stop file)"""
    t0, closed = time.time(), {k: None for k in socks}
    while time.time() - t0 < seconds and not (stop and os.path.exists(stop)):
        live = [s for k, s in socks.items() if closed[k] is None]
        if not live:
            break
        r, _, _ = select.select(live, [], [], 0.05)
        for k, s in socks.items():
            if s in r:
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                if not d:
                    closed[k] = round(time.time() - t0, 3)
    return closed

mode = sys.argv[1]
if mode == "A":  # port sleep_pid file host nonloop report stop
    port, victim, pwn, host, nonloop, report, stop = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
    lines = {
        "inject": "hello rank=0 world=1 pid=999999 host=x;id>%s;# attempt=1\n" % pwn,
        "kill": "hello rank=0 world=1 pid=%s host=localhost attempt=1\n" % victim,
        "held": "hello rank=0 world=1 pid=999998 host=%s attempt=1\n" % host,
        "json": 'hello rank=0 world=1 pid=999997 host=a","rank":99,"x":"y attempt=1\nfault kind=kill","rank":98,"y":"z step=1 t=1\n',
        "nohello": "GET / HTTP/1.0\n",
    }
    socks = {}
    for k, text in lines.items():
        socks[k] = conn(port)
        send(socks[k], text)
    out = {"nonloop": None}
    if nonloop:
        try:
            s = socket.create_connection((nonloop, port), timeout=2)
            out["nonloop"] = "connected"
            s.close()
        except ConnectionRefusedError:
            out["nonloop"] = "refused"
        except OSError as e:
            out["nonloop"] = "error: %s" % e
    out["closed"] = watch(socks, 30, stop)
    json.dump(out, open(report, "w"))
elif mode == "B":  # port envfile sleep_pid file host report
    port, envf, victim, pwn, host, report = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
    secret = open(envf).read().split(" ")[0].strip() or "00"
    good = "hello rank=0 world=1 pid=%s host=%s attempt=1 secret=%s\n"
    bad = {
        "rank 5 of world 1": "hello rank=5 world=1 pid=999999 host=%s attempt=1 secret=%s\n" % (host, secret),
        "world 7": "hello rank=0 world=7 pid=999999 host=%s attempt=1 secret=%s\n" % (host, secret),
        "pid 0": "hello rank=0 world=1 pid=0 host=%s attempt=1 secret=%s\n" % (host, secret),
        "pid -1": "hello rank=0 world=1 pid=-1 host=%s attempt=1 secret=%s\n" % (host, secret),
        "attempt 9": "hello rank=0 world=1 pid=999999 host=%s attempt=9 secret=%s\n" % (host, secret),
        "host x;id>FILE;#": "hello rank=0 world=1 pid=999999 host=x;id>%s;# attempt=1 secret=%s\n" % (pwn, secret),
        "host -oProxyCommand=id": "hello rank=0 world=1 pid=999999 host=-oProxyCommand=id>%s attempt=1 secret=%s\n" % (pwn, secret),
        "host not in the hostfile": "hello rank=0 world=1 pid=999999 host=elsewhere attempt=1 secret=%s\n" % secret,
        "a wrong secret": "hello rank=0 world=1 pid=999999 host=%s attempt=1 secret=%s\n" % (host, "0" * len(secret)),
    }
    socks = {}
    for k, text in bad.items():
        socks[k] = conn(port)
        send(socks[k], text)
    closed = watch(socks, 2)
    s = conn(port)
    send(s, good % (victim, host, secret))
    time.sleep(0.2)
    after = ["beat step=1 done=1 phase=bogus work=0 mpi=-", "beat step=x done=1 phase=step work=0 mpi=-",
             "fault kind=rm-rf step=1 t=0", 'fault kind=kill","x":"y step=1 t=0', "bye done=1 stopped=7"]
    for a in after:
        send(s, a + "\n")
    kept = watch({"good": s}, 0.6)["good"] is None
    s.close()  # without a goodbye: ptrun tears the job down
    json.dump({"closed": closed, "kept": kept, "after": len(after)}, open(report, "w"))
EOF

# the port of a ptrun, from its `channels at HOST:PORT` line (waits up to 10 s)
port_of() {
    i=0
    while [ $i -lt 200 ]; do
        p=$(sed -n 's/^ptrun: launch 1: .* channels at \([^ ]*\):\([0-9]*\).*/\2/p' "$1" 2>/dev/null | head -n 1)
        [ -n "$p" ] && { echo "$p"; return 0; }
        i=$((i + 1))
        sleep 0.05
    done
    return 1
}
# a JSON report's value: jv FILE PYTHON-EXPR-ON-r
jv() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

ME=$(hostname)
NONLOOP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.')
sleep 300 &
VICTIM=$!
PIDS="$VICTIM"

# ---- A: a real job, forged hellos without the secret from 127.0.0.2 ----
mkdir -p "$W/a"
t0=$(date +%s)
"$PTRUN" --max-restarts 0 --backoff 0.2 --mpi-arg --oversubscribe -- "$PTH" $TINY --steps 300 --ckpt-every 150 --ckpt-dir "$W/a/ck" --log "$W/a/log.jsonl" \
    >"$W/a.out" 2>"$W/a.err" &
PA=$!
PIDS="$PIDS $PA"
if ! PORT=$(port_of "$W/a.err"); then
    fail "A: ptrun says where its channels are" "$(tail -n 5 "$W/a.err")"
else
    python3 "$W/client.py" A "$PORT" "$VICTIM" "$W/a/pwned" "$ME" "$NONLOOP" "$W/a.report" "$W/a.stop" 2>"$W/a.client.err" &
    PC=$!
    PIDS="$PIDS $PC"
    i=0
    while [ $i -lt 600 ] && kill -0 $PA 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -9 $PA 2>/dev/null
    wait $PA
    rc=$?
    touch "$W/a.stop"
    wait $PC
    [ -f "$W/a.report" ] || fail "A: the attack client" "$(tail -n 3 "$W/a.client.err")"
    sleep 0.2
    [ ! -e "$W/a/pwned" ]
    check "abuse 1: a hello with host=x;id>FILE;# (no secret, from 127.0.0.2) runs no shell command: FILE not created" $? "$(cat "$W/a/pwned" 2>/dev/null)"
    kill -0 "$VICTIM" 2>/dev/null
    check "abuse 2: a hello with the pid of an unrelated sleep (no secret, from 127.0.0.2) does not kill it" $? "sleep $VICTIM is gone"
    [ "$rc" -eq 0 ] && grep -q "^ptrun: finished: 0 failure" "$W/a.err"
    check "abuse 3: forged hellos held open without a goodbye: the job that finished ends with exit 0" $? "exit $rc; $(grep '^ptrun' "$W/a.err" | grep -v rejected | tail -n 3)"
    bad=$(python3 - "$W/a/ck/ptrun_events.jsonl" "$W/a/log.jsonl" <<'EOF'
import json, sys
bad = 0
for f in sys.argv[1:]:
    try:
        lines = open(f, encoding="utf-8").read().splitlines()
    except OSError as e:
        print("%s: %s" % (f, e)); bad += 1; continue
    for l in lines:
        try:
            pairs = json.loads(l, object_pairs_hook=lambda p: p)
        except ValueError as e:
            print("%s: not JSON: %s" % (f, l[:120])); bad += 1; continue
        keys = [k for k, v in pairs]
        if len(keys) != len(set(keys)) or "x" in keys or "y" in keys or any(k == "rank" and v in (98, 99) for k, v in pairs):
            print("%s: a forged key: %s" % (f, l[:160])); bad += 1
print(bad)
EOF
)
    [ "$(echo "$bad" | tail -n 1)" = 0 ]
    check "abuse 4: a host and a fault kind carrying \",\"rank\":99,\"x\":\"y forge no key in the events file nor the run log (each line parsed)" $? "$(echo "$bad" | head -n 3)"
    cl=$(jv "$W/a.report" 'r["closed"]["nohello"]')
    awk -v c="${cl:-None}" 'BEGIN { exit !(c != "None" && c + 0 <= 1.5) }' && grep -q "^ptrun: rejected (127.0.0.2): a connection whose first line is not a hello" "$W/a.err" &&
        grep -q '"event":"ptrun_rejected"' "$W/a/ck/ptrun_events.jsonl"
    check "abuse 4: a connection whose first line is not a hello with the secret is closed (after ${cl:-?} s) and logged (a ptrun: line, a ptrun_rejected event)" $? \
        "$(grep -c '^ptrun: rejected' "$W/a.err") rejected lines"
    n=$(jv "$W/a.report" 'sum(1 for v in r["closed"].values() if v is not None and v <= 1.5)')
    [ "${n:-0}" -eq 5 ]
    check "abuse 4: all 5 forged connections were closed by ptrun at once (within 1.5 s: $n)" $? "$(jv "$W/a.report" 'r["closed"]')"
    grep -q "^ptrun: launch 1: .* channels at 127\.0\.0\.1:$PORT " "$W/a.err"
    check "abuse 5: with one host the ranks dial 127.0.0.1 (the launch line: channels at 127.0.0.1:$PORT)" $? "$(grep -m1 '^ptrun: launch' "$W/a.err")"
    if [ -n "$NONLOOP" ]; then
        r=$(jv "$W/a.report" 'r["nonloop"]')
        [ "$r" = refused ]
        check "abuse 5: with one host the port is not reachable at this machine's address $NONLOOP ($r)" $?
    else echo "SKIP abuse 5: this machine has no non-loopback IPv4 address to try the port at"; fi
fi
echo "A took $(($(date +%s) - t0)) s" >"$W/a.time"

# ---- B: an insider with the secret; a launcher stand-in ----
mkdir -p "$W/b"
cat >"$W/b/mpirun" <<EOF
#!/bin/sh
printf '%s %s %s\n' "\$PTRAIN_SUPERVISOR_SECRET" "\$PTRAIN_SUPERVISOR" "\$PTRAIN_SUPERVISOR_ID" >"$W/b/env.tmp" && mv "$W/b/env.tmp" "$W/b/env"
i=0
while [ \$i -lt 200 ]; do sleep 0.1; i=\$((i + 1)); done
EOF
chmod +x "$W/b/mpirun"
"$PTRUN" --max-restarts 0 --mpirun "$W/b/mpirun" -- /bin/true --dp 1 --ckpt-dir "$W/b/ck" >"$W/b.out" 2>"$W/b.err" &
PB=$!
PIDS="$PIDS $PB"
i=0
while [ $i -lt 100 ] && [ ! -f "$W/b/env" ]; do sleep 0.05; i=$((i + 1)); done
if ! PORT=$(port_of "$W/b.err") || [ ! -f "$W/b/env" ]; then
    fail "B: ptrun runs the launcher stand-in" "$(tail -n 5 "$W/b.err")"
else
    sec=$(cut -d' ' -f1 "$W/b/env")
    printf '%s\n' "${sec:-none}" >"$W/b/sec"
    oncl=$(grep -l -a -F -f "$W/b/sec" /proc/[0-9]*/cmdline 2>/dev/null | head -n 3) # the pattern from a file: not on grep's own command line
    [ ${#sec} -eq 32 ] && [ -z "$oncl" ]
    check "abuse 1: the run's secret (PTRAIN_SUPERVISOR_SECRET, ${#sec} hex digits) is in the launcher's environment, on no process's command line" $? "$oncl"
    python3 "$W/client.py" B "$PORT" "$W/b/env" "$VICTIM" "$W/b/pwned" "$ME" "$W/b.report" 2>"$W/b.client.err"
    i=0
    while [ $i -lt 150 ] && kill -0 $PB 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -9 $PB 2>/dev/null
    wait $PB
    [ -f "$W/b.report" ] || fail "B: the insider client" "$(tail -n 3 "$W/b.client.err")"
    nb=$(jv "$W/b.report" 'len(r["closed"])')
    nc=$(jv "$W/b.report" 'sum(1 for v in r["closed"].values() if v is not None)')
    nl=$(grep -c "^ptrun: rejected (127.0.0.2): .*; closed" "$W/b.err")
    [ "${nc:-0}" -eq "${nb:-x}" ] && [ "$nl" -ge "$nb" ]
    check "abuse 1: with the secret, each hello with a bad field is closed and logged (rank 5 of world 1, world 7, pid 0, pid -1, attempt 9, host x;id>FILE;#, host -oProxyCommand=.., a host not in the hostfile, a wrong secret: $nc of $nb closed, $nl logged)" \
        $? "still open: $(jv "$W/b.report" '[k for k, v in r["closed"].items() if v is None]')"
    [ ! -e "$W/b/pwned" ]
    check "abuse 1: with the secret, a host of x;id>FILE;# or -oProxyCommand=.. runs nothing: FILE not created" $?
    kept=$(jv "$W/b.report" 'r["kept"]')
    nd=$(grep -c "^ptrun: rejected (127.0.0.2): a line of rank 0: .*; dropped" "$W/b.err")
    [ "$kept" = True ] && [ "$nd" -ge "$(jv "$W/b.report" 'r["after"]')" ] && ! grep -q "fault injected on rank 0" "$W/b.err"
    check "abuse 4: after a good hello, lines with bad fields (phase, step, kind, stopped) are dropped and logged, not acted on; the channel stays ($nd dropped)" $? \
        "kept $kept; $(grep '^ptrun' "$W/b.err" | tail -n 3)"
    kill -0 "$VICTIM" 2>/dev/null && grep -q "pid $VICTIM is not a process of this job" "$W/b.err"
    check "abuse 2: with the secret, a hello of an unrelated sleep's pid: at teardown ptrun finds it is no process of the job and does not signal it" $? \
        "$(grep '^ptrun: \(death\|torn\|rank\)' "$W/b.err" | head -n 4)"
    sup=$(cut -d' ' -f2 "$W/b/env")
    case $sup in 127.0.0.1:*) r=0 ;; *) r=1 ;; esac
    check "abuse 5: the ranks' environment says PTRAIN_SUPERVISOR=$sup (loopback with one host)" $r
fi

# ---- refusals at start (no job: --mpirun /bin/true) ----
mkdir -p "$W/r"
if [ -n "$NONLOOP" ]; then printf 'localhost slots=1\n%s slots=1\n' "$NONLOOP" >"$W/r/hosts2"; else printf 'localhost slots=2\n' >"$W/r/hosts2"; fi
"$PTRUN" --hosts "$W/r/hosts2" --advertise ptrun-abuse-nosuch.invalid --mpirun /bin/true -- /bin/true --dp 2 --ckpt-dir "$W/r/ck" >"$W/r/adv.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "ptrun-abuse-nosuch.invalid.* does not resolve" "$W/r/adv.out"
check "abuse 5: with several hosts, an advertised name that does not resolve stops ptrun at start, naming it (exit 2)" $? "exit $rc: $(tail -n 2 "$W/r/adv.out")"
printf 'localhost slots=1\n-oProxyCommand=id slots=1\n' >"$W/r/hosts3"
"$PTRUN" --hosts "$W/r/hosts3" --mpirun /bin/true -- /bin/true --dp 2 --ckpt-dir "$W/r/ck" >"$W/r/opt.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "'-oProxyCommand=id' is not a host name" "$W/r/opt.out"
check "abuse 1: a hostfile host beginning with '-' (an option of the agent) is refused at start (exit 2)" $? "exit $rc: $(tail -n 2 "$W/r/opt.out")"

# ---- C: a machine whose name does not resolve ----
if command -v unshare >/dev/null 2>&1 && unshare -u true 2>/dev/null; then
    mkdir -p "$W/c"
    NONAME=ptrun-abuse-noname-$$
    if getent hosts "$NONAME" >/dev/null 2>&1; then echo "SKIP abuse 5: $NONAME resolves here"
    else
        timeout 60 unshare -u sh -c 'hostname "$1" && shift && exec "$@"' sh "$NONAME" "$PTRUN" --max-restarts 0 --mpi-arg --oversubscribe -- "$PTH" $TINY --steps 4 \
            --ckpt-dir "$W/c/ck" >"$W/c.out" 2>"$W/c.err"
        rc=$?
        [ $rc -eq 0 ] && grep -q "^ptrun: finished" "$W/c.err"
        check "abuse 5: on a machine whose name ($NONAME) does not resolve, a one-host job under ptrun finishes (exit 0)" $? "exit $rc; $(grep -v '^ *$' "$W/c.err" | tail -n 3)"
    fi
else echo "SKIP abuse 5: no UTS namespace here (unshare -u): the unresolvable-name trial did not run"; fi

kill -9 "$VICTIM" 2>/dev/null
finish
