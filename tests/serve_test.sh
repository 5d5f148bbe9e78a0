#!/bin/sh
# tests/serve_test.sh [WORKDIR] - tools/ptserve over HTTP on loopback, with a tiny byte-level GPT
# that build/pttrain trains here (60 steps, context 64). tests/serve_check.py (python3's
# http.client) drives it: every endpoint, completions and chat, streamed == plain text with the same
# seed, the usage chunk, n > 1, stop strings, logprobs, each 400 naming its field, 20 concurrent
# streaming clients, a timeout (408), /metrics parsed; a second server (--max-seqs 1 --max-queue 2):
# 429 with Retry-After; a third (--max-seqs 1): a disconnect cancels and frees its blocks, a higher
# priority overtakes a queue; two more (--lookup 4; --draft, the model itself): a request's text and
# logprobs with drafting equal those with "speculative": false, greedy and sampled; --device opencl:
# two greedy requests at once, the texts of a CPU server; SIGTERM during a request: /health 503 draining, new requests 503, the
# running one finishes, exit 0. Then the playground page in headless Chromium (tests/serve_browser.py,
# chromium-driver + python3-selenium): a screenshot is kept in WORKDIR/playground.png. Without
# python3 or libmicrohttpd: one failure naming what to install (make deps).
# Env SERVE_BIN: the ptserve to test (default: built here with its Build: line), e.g. a sanitizer
# build. Prints PASS/FAIL lines and "N passed, N failed".
set -u
W=${1:-build/tests/serve}
mkdir -p "$W" build
P=0
F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; F=$((F + 1)); }
finish() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null; done
    echo "$P passed, $F failed"
    exit 0
}
PIDS=""
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PTRAIN_PROGRESS
command -v python3 >/dev/null 2>&1 || { fail "python3 not found (make deps)"; finish; }
# the browser test: Debian's python3 (python3-selenium), whichever python3 comes first on PATH
BPY=/usr/bin/python3
[ -x "$BPY" ] || BPY=python3

# build: the Build: line of tools/ptserve.c is the Makefile's recipe
S=${SERVE_BIN:-}
if [ -z "$S" ]; then
    bline=$(sed -n 's/^ *Build: //p' tools/ptserve.c | head -n 1)
    recipe=$(sed -n '/^$(BUILD)\/ptserve:/{n;p;}' Makefile | sed 's/^[[:space:]]*//; s|\$@|build/ptserve|; s|\$(CC)|cc|; s|\$(MPICC)|mpicc|')
    if [ "$bline" = "$recipe" ] && sh -c "$bline -Wall -Wextra" >"$W/build.log" 2>&1 && ! grep -q 'warning:' "$W/build.log"; then
        pass "ptserve builds with its Build: line (the Makefile's recipe), -Wall -Wextra clean"
    else
        fail "ptserve build: Build: '$bline', Makefile '$recipe': $(head -c 600 "$W/build.log")"
        finish
    fi
    S=./build/ptserve
fi
make -s build/pttrain >"$W/make.log" 2>&1 || fail "make build/pttrain: $(tail -n 5 "$W/make.log")"

# the tiny model
mkdir -p "$W/corpus"
if [ ! -f "$W/ck/latest" ]; then
    i=0
    : >"$W/corpus/train.txt"
    while [ $i -lt 300 ]; do echo "the quick brown fox jumps over the lazy dog $i times." >>"$W/corpus/train.txt"; i=$((i + 1)); done
    head -n 60 "$W/corpus/train.txt" >"$W/corpus/val.txt"
    rm -rf "$W/corpus/"*.bin "$W/ck"
    ./build/pttrain --data "$W/corpus" --layers 2 --width 64 --heads 4 --seq 64 --batch 8 --seed 3 --val-every 0 --lr 1e-2 --steps 60 \
        --ckpt-dir "$W/ck" --ckpt-every 60 >"$W/train.log" 2>&1 || { fail "pttrain (the tiny model): $(tail -n 3 "$W/train.log")"; finish; }
fi

# start NAME ARGS...: a server on a free port; URL in $URL
start() {
    name=$1
    shift
    rm -f "$W/$name.out" # a rerun's old URL is not read before the new server truncates it
    "$S" --ckpt "$W/ck" --port 0 --threads 1 "$@" >"$W/$name.out" 2>"$W/$name.err" &
    SPID=$!
    PIDS="$PIDS $SPID"
    URL=""
    t=0
    while [ $t -lt 300 ] && [ -z "$URL" ]; do
        URL=$(sed -n 's/^ptserve: listening on //p' "$W/$name.out" 2>/dev/null)
        [ -n "$URL" ] || { kill -0 $SPID 2>/dev/null || break; sleep 0.1; t=$((t + 1)); }
    done
    if [ -n "$URL" ]; then pass "ptserve $* prints its URL once ready ($URL)"
    else fail "ptserve $* did not start: $(cat "$W/$name.err" | head -c 600)"; fi
}
# stop PID NAME: SIGTERM, exit 0 within 20 s
stop() {
    kill -TERM "$1" 2>/dev/null
    t=0
    while kill -0 "$1" 2>/dev/null && [ $t -lt 200 ]; do sleep 0.1; t=$((t + 1)); done
    if kill -0 "$1" 2>/dev/null; then fail "$2: still running 20 s after SIGTERM"; kill -9 "$1"; return; fi
    wait "$1"
    rc=$?
    if [ $rc -eq 0 ] && ! grep -qE 'ERROR|runtime error|WARNING: ThreadSanitizer' "$W/$2.err"; then pass "$2: SIGTERM drains, exit 0, stderr clean"
    else fail "$2: exit $rc after SIGTERM: $(head -c 1500 "$W/$2.err")"; fi
}

start main --max-conns-per-ip 64  # 20 concurrent streams and ptload from one address: over the default 16
if [ -n "$URL" ]; then
    python3 tests/serve_check.py main "$URL" >"$W/main.log" 2>&1 || echo "FAIL serve_check.py main crashed: $(tail -n 5 "$W/main.log")" >>"$W/main.log"
    cat "$W/main.log"
    # the load generator: Poisson and gamma-bursty arrivals, every request completed, its JSON line
    if [ -z "${SERVE_BIN:-}" ]; then
        L=$(sed -n 's/^ *Build: //p' tools/ptload.c | head -n 1)
        if sh -c "$L -Wall -Wextra" >"$W/ptload.build.log" 2>&1 && ! grep -q 'warning:' "$W/ptload.build.log"; then pass "ptload builds with its Build: line, -Wall -Wextra clean"
        else fail "ptload build ($L): $(head -c 600 "$W/ptload.build.log")"; fi
    fi
    for b in 1 0.5; do
        ./build/ptload --url "${URL%/}" --rate 40 --burstiness $b --requests 16 --prompt-len 2:6 --output-len 4:12 >"$W/ptload.$b.log" 2>&1
        rc=$?
        j=$(tail -n 1 "$W/ptload.$b.log")
        if [ $rc -eq 0 ] && echo "$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["completed"] == 16 and d["p99_ttft_ms"] > 0 and d["output_throughput"] > 0 and d["refused_share"] == 0' 2>/dev/null
        then pass "ptload --burstiness $b: 16 requests completed, a JSON line with p99 TTFT $(echo "$j" | sed 's/.*"p99_ttft_ms":\([0-9.]*\).*/\1/') ms"
        else fail "ptload --burstiness $b: exit $rc: $(tail -n 3 "$W/ptload.$b.log")"; fi
    done
    stop "$SPID" main
fi

start queue --max-seqs 1 --max-queue 2 --max-conns-per-ip 64  # 24 clients at once
if [ -n "$URL" ]; then
    python3 tests/serve_check.py queue "$URL" 2>&1 | tee "$W/queue.log"
    stop "$SPID" queue
fi

# speculative decoding: prompt lookup, then a draft model (the model itself: a checkpoint as --draft)
for sv in "--lookup 4" "--draft $W/ck --draft-tokens 3"; do
    nm=spec_${sv%% *}
    nm=spec_${nm#spec_--}
    # shellcheck disable=SC2086
    start "$nm" $sv
    if [ -n "$URL" ]; then
        python3 tests/serve_check.py spec "$URL" "ptserve $sv" 2>&1 | tee "$W/$nm.log"
        stop "$SPID" "$nm"
    fi
done

# --device opencl (the engine's steps on the OpenCL device: PoCL here): two greedy requests at once
# give the texts of a server on the CPU; without an OpenCL driver and CLBlast: skipped (not counted)
if ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libOpenCL\.so\.1 ' && ldconfig -p 2>/dev/null | grep -q 'libclblast\.so\.1 '; then
    start clcpu --max-seqs 2
    U0=$URL P0=$SPID
    start cl --max-seqs 2 --device opencl
    if [ -n "$U0" ] && [ -n "$URL" ]; then
        if python3 - "$U0" "$URL" >"$W/cl.log" 2>&1 <<'PY'
import http.client, json, sys, threading, urllib.parse
def texts(url):
    u, out = urllib.parse.urlparse(url), {}
    def one(i, prompt):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0}))
        out[i] = json.loads(c.getresponse().read())["choices"][0]["text"]
    ts = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(["the quick", "over the lazy dog 1"])]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return [out[0], out[1]]
a, b = texts(sys.argv[1]), texts(sys.argv[2])
print("texts of %d and %d characters" % (len(a[0]), len(a[1])) if a == b else "cpu %r, opencl %r" % (a, b))
sys.exit(0 if a == b and all(len(x) > 0 for x in a) else 1)
PY
        then pass "ptserve --device opencl: two greedy requests at once, the texts of the server on the CPU ($(head -c 120 "$W/cl.log"))"
        else fail "ptserve --device opencl: $(head -c 600 "$W/cl.log" | tr '\\' '/')"; fi
    fi
    [ -n "$URL" ] && stop "$SPID" cl
    [ -n "$U0" ] && stop "$P0" clcpu
else echo "SKIP ptserve --device opencl: no OpenCL driver or CLBlast (not counted)"; fi

start prio --max-seqs 1 --step-delay-ms 5
if [ -n "$URL" ]; then
    python3 tests/serve_check.py prio "$URL" 2>&1 | tee "$W/prio.log"
    # the playground in a real browser
    if [ "${SERVE_NO_BROWSER:-0}" != 1 ]; then
        if $BPY tests/serve_browser.py "$URL" "$W/playground.png" >"$W/browser.log" 2>&1; then pass "the playground in headless Chromium: $(tail -n 1 "$W/browser.log"); screenshot $W/playground.png"
        else fail "the playground in headless Chromium: $(tail -n 8 "$W/browser.log")"; fi
    fi
    # the drain: a long streaming request; SIGTERM; it still finishes; health says draining; new work gets 503
    python3 - "$URL" >"$W/drain.log" 2>&1 <<'PY' &
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
c.request("POST", "/v1/completions", json.dumps({"prompt": "the", "max_tokens": 60, "stream": True, "stream_options": {"include_usage": True}}))
r = c.getresponse()
print("started", flush=True)
print(r.status, r.read().decode().strip().splitlines()[-1])
PY
    CPID=$!
    t=0
    while ! grep -q started "$W/drain.log" && [ $t -lt 100 ]; do sleep 0.1; t=$((t + 1)); done
    kill -TERM "$SPID"
    sleep 0.05
    h=$(curl -s -o /dev/null -w '%{http_code}' "${URL}health" 2>/dev/null || echo none)
    n=$(curl -s -o /dev/null -w '%{http_code}' -d '{"prompt":"a"}' "${URL}v1/completions" 2>/dev/null || echo none)
    wait $CPID
    if grep -q '^200 data: \[DONE\]$' "$W/drain.log"; then pass "SIGTERM: the running streaming request finishes ([DONE])"
    else fail "SIGTERM drain: the running request: $(cat "$W/drain.log")"; fi
    if [ "$h" = 503 ] && [ "$n" = 503 ]; then pass "draining: /health $h, a new request $n"
    else fail "draining: /health $h, a new request $n (expected 503, 503)"; fi
    stop "$SPID" prio
fi
# model-parallel serving: a checkpoint trained on dp 2 x pp 2 with ZeRO-3 served by ptserve --tp 2 and
# --pp 2 under mpirun answers as one process does (greedy text equal); SIGTERM to rank 0 drains every
# rank (exit 0); a follower killed ends the job, mpirun naming it
rm -rf "$W/ck3"
if command -v mpirun >/dev/null 2>&1 && PTRAIN_THREADS=1 timeout 300 mpirun --oversubscribe -x PTRAIN_THREADS -np 4 ./build/pttrain --data "$W/corpus" \
    --layers 2 --width 64 --heads 4 --seq 64 --batch 8 --seed 5 --val-every 0 --lr 1e-2 --steps 12 --dp 2 --pp 2 --zero 3 --ckpt-dir "$W/ck3" \
    >"$W/train3.log" 2>&1; then
    pass "pttrain on dp 2 x pp 2 with ZeRO-3 saves a checkpoint (the model served below)"
    rm -rf "$W/ck1" && mv "$W/ck" "$W/ck1" && mv "$W/ck3" "$W/ck" # start / the layouts below serve W/ck
    start ref
    REF=""
    [ -n "$URL" ] && REF=$(curl -s -d '{"prompt":"the ","max_tokens":24,"temperature":0}' "${URL}v1/completions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null)
    [ -n "$URL" ] && stop "$SPID" ref
    for lay in "--tp 2" "--pp 2"; do
        name=mp$(echo "$lay" | tr -d ' -')
        rm -f "$W/$name.out"
        timeout 120 mpirun --oversubscribe -np 2 "$S" --ckpt "$W/ck" --port 0 --threads 1 $lay >"$W/$name.out" 2>"$W/$name.err" &
        MPID=$!
        URL=""
        t=0
        while [ $t -lt 300 ] && [ -z "$URL" ] && kill -0 $MPID 2>/dev/null; do URL=$(sed -n 's/^ptserve: listening on //p' "$W/$name.out" 2>/dev/null); sleep 0.1; t=$((t + 1)); done
        GOT=""
        [ -n "$URL" ] && GOT=$(curl -s -d '{"prompt":"the ","max_tokens":24,"temperature":0}' "${URL}v1/completions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' 2>/dev/null)
        if [ -n "$GOT" ] && [ "$GOT" = "$REF" ]; then pass "ptserve $lay under mpirun -np 2: the greedy text of one process"
        else fail "ptserve $lay under mpirun -np 2: '$GOT', one process '$REF' ($(head -c 400 "$W/$name.err"))"; fi
        if [ "$lay" = "--tp 2" ]; then # the drain, through rank 0
            P0=$(sed -n 's/.*pids 0:\([0-9]*\) .*/\1/p' "$W/$name.out")
            [ -n "$P0" ] && kill -TERM "$P0"
            wait $MPID
            rc=$?
            if [ $rc -eq 0 ] && grep -q 'drained, exiting' "$W/$name.out"; then pass "ptserve $lay: SIGTERM to rank 0 drains and ends every rank (mpirun exits 0)"
            else fail "ptserve $lay: after SIGTERM to rank 0 ($P0): mpirun exit $rc: $(tail -c 400 "$W/$name.err")"; fi
        else # a follower killed: the job ends, mpirun naming the rank, no hang
            P1=$(sed -n 's/.*pids 0:[0-9]* 1:\([0-9]*\) .*/\1/p' "$W/$name.out")
            [ -n "$P1" ] && kill -9 "$P1"
            t=0
            while kill -0 $MPID 2>/dev/null && [ $t -lt 300 ]; do sleep 0.1; t=$((t + 1)); done
            if kill -0 $MPID 2>/dev/null; then fail "ptserve $lay: still running 30 s after rank 1 was killed"; kill -9 $MPID
            elif grep -q 'rank 1' "$W/$name.err"; then pass "ptserve $lay: rank 1 killed ends the job within $((t / 10)) s, the message naming rank 1"
            else fail "ptserve $lay: rank 1 killed: the job ended without naming it: $(tail -c 400 "$W/$name.err")"; fi
            wait $MPID 2>/dev/null
        fi
    done
    rm -rf "$W/ck3" && mv "$W/ck" "$W/ck3" && mv "$W/ck1" "$W/ck"
elif command -v mpirun >/dev/null 2>&1; then
    fail "pttrain on dp 2 x pp 2 with ZeRO-3: $(tail -n 5 "$W/train3.log")"
fi
P=$((P + $(cat "$W/main.log" "$W/queue.log" "$W/prio.log" "$W/spec_lookup.log" "$W/spec_draft.log" 2>/dev/null | grep -c '^PASS')))
F=$((F + $(cat "$W/main.log" "$W/queue.log" "$W/prio.log" "$W/spec_lookup.log" "$W/spec_draft.log" 2>/dev/null | grep -c '^FAIL')))
PIDS=""
finish
