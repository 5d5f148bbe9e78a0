#!/bin/sh
# tests/abuse_serve.sh [WORKDIR] - tools/ptserve under abuse, on loopback: the attacker from 127.0.0.1
# (and 127.0.0.10..39), the client it must not lock out from 127.0.0.2. A tiny model with a BPE
# tokenizer (40 merges of a corpus with runs of 2,048 'a', so that one token is 1,024 bytes or more)
# is trained here in a few seconds. Three servers (tests/abuse_serve.py drives each):
#   default limits: abuse 6 (1,000 slow connections vs /health; the per-address cap; /metrics),
#     abuse 7 (30 unfinished 15 MB bodies: RSS, 503 + Retry-After), abuse 8 (a long token in text and
#     logprobs), abuse 9 (half-closed clients answered), abuse 10 (NUL in chat content), abuse 11
#     (top_p / temperature that round to float 0);
#   --read-timeout 1 --step-delay-ms 40: abuse 6 (trickled headers and body cut; a long stream not);
#   --api-key-file --tls-cert --tls-key (a self-signed certificate made here with openssl):
#     abuse key (401 in OpenAI's shape; /health, /metrics open), abuse tls (HTTPS with the CA, the
#     openai client from build/pyenv, skipped with a NOTE where it does not import).
# Env SERVE_BIN: the ptserve to test (default: built here with its Build: line), e.g. a sanitizer
# build or an older one. Prints PASS/FAIL lines and "N passed, N failed" (exit 1 if any failed).
set -u
W=${1:-build/tests/abuse_serve}
mkdir -p "$W" build
P=0
F=0
PIDS=""
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1"; F=$((F + 1)); }
cleanup() { for pid in $PIDS; do kill -9 "$pid" 2>/dev/null; done; PIDS=""; }
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM
finish() {
    cleanup
    echo "$P passed, $F failed"
    [ "$F" -eq 0 ]
    exit $?
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PTRAIN_PROGRESS
ulimit -n 4096 2>/dev/null || true
command -v python3 >/dev/null 2>&1 || { fail "abuse 6: python3 not found (make deps)"; finish; }
# the openai client lives in the tests' Python environment (tools/deps.sh)
PY=python3
[ -x build/pyenv/bin/python ] && PY=build/pyenv/bin/python

S=${SERVE_BIN:-}
if [ -z "$S" ]; then
    bline=$(sed -n 's/^ *Build: //p' tools/ptserve.c | head -n 1)
    if sh -c "$bline -Wall -Wextra" >"$W/build.log" 2>&1 && ! grep -q 'warning:' "$W/build.log"; then :
    else fail "abuse 6: ptserve build ($bline): $(head -c 600 "$W/build.log")"; finish; fi
    S=./build/ptserve
fi
make -s build/pttrain build/prepare_shards >"$W/make.log" 2>&1 || { fail "abuse 8: make build/pttrain build/prepare_shards: $(tail -n 5 "$W/make.log")"; finish; }

# the model: BPE of 40 merges over text with runs of 2,048 'a'; "N.\n" is followed by them
if [ ! -f "$W/ck/latest" ]; then
    rm -rf "$W/corpus" "$W/bpe" "$W/ck"
    mkdir -p "$W/corpus"
    python3 - "$W/corpus" <<'PY'
import sys
lines = []
for i in range(200):
    lines.append("the quick brown fox jumps over the lazy dog %d times." % i)
    if i % 2 == 0:
        lines.append("%d.\n%s" % (i % 10, "a" * 2048))
open(sys.argv[1] + "/train.txt", "w").write("\n".join(lines) + "\n")
open(sys.argv[1] + "/val.txt", "w").write("\n".join(lines[:40]) + "\n")
PY
    if ! ./build/prepare_shards --bpe 40 --val "$W/corpus/val.txt" "$W/bpe" "$W/corpus/train.txt" >"$W/bpe.log" 2>&1 ||
        ! ./build/pttrain --data "$W/bpe" --layers 2 --width 64 --heads 4 --seq 64 --batch 8 --seed 3 --val-every 0 --lr 1e-2 --steps 60 --sample 0 \
            --ckpt-dir "$W/ck" --ckpt-every 60 >"$W/train.log" 2>&1; then
        fail "abuse 8: the BPE model: $(tail -n 3 "$W/bpe.log" "$W/train.log")"
        finish
    fi
fi
# the certificate (self-signed, for 127.0.0.1) and the API key
if [ ! -f "$W/cert.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" \
        -keyout "$W/key.pem" -out "$W/cert.pem" >"$W/openssl.log" 2>&1 || rm -f "$W/cert.pem"
fi
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$W/api_key"
echo >>"$W/api_key"

# start NAME ITEMS ARGS...: a server on a free port, URL in $URL, pid in $SPID (ITEMS: the checks that need it, for a failure)
start() {
    name=$1 items=$2
    shift 2
    "$S" --ckpt "$W/ck" --port 0 --threads 1 "$@" >"$W/$name.out" 2>"$W/$name.err" &
    SPID=$!
    PIDS="$PIDS $SPID"
    URL=""
    t=0
    while [ $t -lt 300 ] && [ -z "$URL" ]; do
        URL=$(sed -n 's/^ptserve: listening on //p' "$W/$name.out" 2>/dev/null)
        [ -n "$URL" ] || { kill -0 $SPID 2>/dev/null || break; sleep 0.1; t=$((t + 1)); }
    done
    [ -n "$URL" ] || fail "$items: ptserve $* did not start: $(head -c 400 "$W/$name.err")"
}
# stop PID NAME: SIGTERM drains, exit 0, no sanitizer report
stop() {
    kill -TERM "$1" 2>/dev/null
    t=0
    while kill -0 "$1" 2>/dev/null && [ $t -lt 200 ]; do sleep 0.1; t=$((t + 1)); done
    if kill -0 "$1" 2>/dev/null; then fail "abuse 6: $2: still running 20 s after SIGTERM"; kill -9 "$1"; return; fi
    wait "$1"
    rc=$?
    if [ $rc -eq 0 ] && ! grep -qE 'ERROR|runtime error|WARNING: ThreadSanitizer' "$W/$2.err"; then pass "abuse 6: $2: SIGTERM drains after the abuse, exit 0, stderr clean"
    else fail "abuse 6: $2: exit $rc after SIGTERM: $(head -c 1500 "$W/$2.err")"; fi
}
run_py() { # MODE ARGS...: the helper's lines, counted
    $PY tests/abuse_serve.py "$@" >"$W/$1.log" 2>&1 || echo "FAIL abuse: tests/abuse_serve.py $1 crashed: $(tail -n 4 "$W/$1.log" | tr '\n' ' ')" >>"$W/$1.log"
    cat "$W/$1.log"
    P=$((P + $(grep -c '^PASS' "$W/$1.log")))
    F=$((F + $(grep -c '^FAIL' "$W/$1.log")))
}

start plain "abuse 6-11"
if [ -n "$URL" ]; then
    run_py plain "$URL" "$SPID"
    stop "$SPID" plain
fi
start deadline "abuse 6 (--read-timeout)" --read-timeout 1 --step-delay-ms 40
if [ -n "$URL" ]; then
    run_py deadline "$URL" "$SPID"
    stop "$SPID" deadline
fi
if [ -f "$W/cert.pem" ]; then
    start tls "abuse tls, abuse key" --api-key-file "$W/api_key" --tls-cert "$W/cert.pem" --tls-key "$W/key.pem"
    if [ -n "$URL" ]; then
        case "$URL" in https://*) pass "abuse tls: --tls-cert/--tls-key: the server says $URL" ;; *) fail "abuse tls: the server says $URL, not https" ;; esac
        if command -v curl >/dev/null 2>&1; then
            h=$(curl -s --cacert "$W/cert.pem" "${URL}health" 2>&1)
            k=$(curl -s --cacert "$W/cert.pem" -H "Authorization: Bearer $(cat "$W/api_key")" "${URL}v1/models" 2>&1)
            n=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$W/cert.pem" "${URL}v1/models" 2>&1)
            if [ "$h" = '{"status":"ok"}' ] && echo "$k" | grep -q '"object":"list"' && [ "$n" = 401 ]; then
                pass "abuse tls: curl --cacert: /health $h, /v1/models with the key listed, without it $n"
            else fail "abuse tls: curl --cacert: /health '$h', /v1/models with the key '$k', without '$n'"; fi
        else echo "NOTE abuse tls: no curl: its check skipped"; fi
        run_py tls "$URL" "$SPID" "$W/cert.pem" "$W/api_key"
        stop "$SPID" tls
    fi
else fail "abuse tls: openssl could not make a certificate: $(tail -n 3 "$W/openssl.log")"; fi
# bad flags: each refused with exit 2 and a message naming the flag
bf=0
while IFS='|' read -r flag args; do
    # shellcheck disable=SC2086
    "$S" --ckpt "$W/ck" --port 0 $args >"$W/bad.out" 2>"$W/bad.err"
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q -- "$flag" "$W/bad.err"; then
        fail "abuse key: ptserve $args: exit $rc (expected 2 and a message naming $flag): $(head -c 300 "$W/bad.err")"
        bf=$((bf + 1))
    fi
done <<EOF
--api-key-file|--api-key-file /nonexistent
--tls-key|--tls-cert $W/cert.pem
--tls-cert|--tls-cert $W/api_key --tls-key $W/key.pem
--tls-key|--tls-cert $W/cert.pem --tls-key $W/cert.pem
--api-key|--api-key a --api-key-file $W/api_key
--read-timeout|--read-timeout 0
--max-conns-per-ip|--max-conns-per-ip 0
--max-body-memory|--max-body-memory 12
--kv-type|--kv-type q4_0
EOF
[ $bf -eq 0 ] && pass "abuse key: bad key, certificate and limit flags refused: exit 2, the message naming the flag"
finish
