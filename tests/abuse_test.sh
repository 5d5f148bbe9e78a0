#!/bin/sh
# tests/abuse_test.sh [BUILD_DIR] - the abuse suite: what an attacker on the same network, or a crafted
# file, tries against ptrain's tools, each check named after the hole it closes (docs/fault-tolerance.md and
# docs/serving.md state the threat model). Runs tests/abuse_ptrun.sh (the supervisor's channel: forged lines,
# shell text, signals to strangers, JSON injection, the address it listens on), tests/abuse_serve.sh (ptserve:
# slow clients, body floods, keys, TLS, long tokens, half-closed clients, NUL, top_p), tests/abuse_load.sh
# (the loaders: exploding tokenizers, sizes from metadata, rejected tokenizers) and its own check of
# `make serve` on a fresh machine (deps before the build). Prints every part's PASS/FAIL lines, then
# "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build/tests/abuse}
mkdir -p "$BUILD" || exit 1
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
P=0 F=0
pass() { echo "PASS $1"; P=$((P + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; F=$((F + 1)); }

# ---- 15: make serve as a fresh machine's first command: deps (libmicrohttpd's headers) before the build ----
# make -n in an empty build folder lists the commands in the order they would run (the recursive $(MAKE)
# runs under -n too and lists its own)
rm -rf "$BUILD/mk15"
make -n serve BUILD="$BUILD/mk15" >"$BUILD/mk15.out" 2>&1
d=$(grep -n 'tools/deps.sh' "$BUILD/mk15.out" | head -n 1 | cut -d: -f1)
c=$(grep -n 'tools/ptserve.c' "$BUILD/mk15.out" | head -n 1 | cut -d: -f1)
if [ -n "$d" ] && [ -n "$c" ] && [ "$d" -lt "$c" ]; then pass "abuse 15: make serve runs make deps (line $d of make -n) before it compiles ptserve (line $c)"
else fail "abuse 15: make serve runs make deps before it compiles ptserve" "deps at line ${d:-none}, ptserve.c at line ${c:-none} of make -n serve: $(head -n 5 "$BUILD/mk15.out")"; fi
rm -rf "$BUILD/mk15"

# ---- the parts ----
for part in ptrun serve load; do
    s=tests/abuse_$part.sh
    if [ ! -f "$s" ]; then fail "abuse $part: $s missing"; continue; fi
    t0=$(date +%s)
    sh "$s" "$BUILD/$part" >"$BUILD/$part.log" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|NOTE|SKIP) ' "$BUILD/$part.log"
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$BUILD/$part.log" | tail -n 1)
    if [ -z "$last" ]; then
        fail "abuse $part: $s printed no final line (exit $rc)" "$(tail -n 10 "$BUILD/$part.log")"
        continue
    fi
    p=$(echo "$last" | cut -d' ' -f1) f=$(echo "$last" | cut -d' ' -f3)
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1 && echo "FAIL abuse $part: exit $rc after its final line"
    P=$((P + p)) F=$((F + f))
    echo "NOTE abuse $part: $p passed, $f failed ($(($(date +%s) - t0)) s)"
done
echo "$P passed, $F failed"
[ "$F" -eq 0 ]
