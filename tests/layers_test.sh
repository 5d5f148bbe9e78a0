#!/bin/sh
# tests/layers_test.sh [BUILD_DIR] - the header's sections as layers: no call from a section to a later one.
# tests/layers_check.py scans ptrain.h (comments, strings and character literals blanked first): every
# function a section defines (and every function-like macro's body) may call, or take the address of,
# only functions and macros defined in the same section or an earlier one; >>api defines nothing. A
# lower section reaches a higher one only through a pointer the higher one installs (the context's
# hooks table, the backend's kernel table, pt_dist's coll_hook): "x->fn(" is not a call to a name.
# Checks: ptrain.h has no such call; the scan saw the whole file (its sections, functions, calls);
# and the checker can fail: a synthetic header with one forward call among decoys (the name in a
# comment, a string, a prototype, a call through a pointer, braces split over #if / #else) reports
# exactly that call at its line, a forward use of a function's address is reported, and a copy of
# ptrain.h with one forward call added is reported.
set -u
BUILD=${1:-build/tests}
mkdir -p "$BUILD" || exit 1
NP=0
NF=0
pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }
CHECK="python3 tests/layers_check.py"
if ! command -v python3 >/dev/null 2>&1; then
    fail "layers" "python3 not found (the checker is tests/layers_check.py)"
    echo "$NP passed, $NF failed"
    exit 1
fi

# 1. the header itself
out=$($CHECK ptrain.h 2>&1)
rc=$?
n=$(printf '%s\n' "$out" | grep -c 'defined in later section')
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then pass "layers: ptrain.h: no section calls a later one"
else fail "layers: ptrain.h" "$n call(s) to a later section (exit $rc):
$(printf '%s\n' "$out" | head -n 30)"; fi

# 2. the scan saw the file: every marker a section, a plausible number of functions and calls
stats=$($CHECK ptrain.h --stats 2>&1 | tail -n 1)
markers=$(grep -c '^// >>' ptrain.h)
set -- $(echo "$stats" | tr -c '0-9\n' ' ')
if [ "$#" -eq 4 ] && [ "$1" -eq "$markers" ] && [ "$2" -ge 1000 ] && [ "$3" -ge 100 ] && [ "$4" -ge 3000 ]; then
    pass "layers: the scan saw $1 sections, $2 functions, $3 macros, $4 calls and uses"
else fail "layers: scan" "expected $markers sections, >= 1000 functions, >= 100 macros, >= 3000 calls; got: $stats"; fi

# 3. a synthetic header: one forward call (line 30) among decoys
syn=$BUILD/layers_syn.h
cat >"$syn" <<'EOF'
/* manual: pt__high_fn() is mentioned here */
// >>api  public declarations
void pt_high_pub(int x);
static int pt__api_inline(int x) { return pt__high_fn(x); }
#define PT_API_MACRO(x) pt__high_fn(x)
// >>low  the lower layer
struct hooks { int (*high_fn)(int); };
struct ctx { struct hooks hooks; };
static int pt__high_fn(int x); /* a prototype is no call: pt__high_fn(1) */
static int pt__low_a(int x) { return x + 1; }
#define PT__LOW_M(x) pt__low_a(x)
static int pt__low_b(struct ctx *c, int x) {
    const char *s = "pt__high_fn(2) \" pt__high_fn(3)";
    char k = '(';
    /* pt__high_fn(4) */
    // pt__high_fn(5)
    x += c->hooks.high_fn(x) + (&c->hooks)->high_fn(x); /* through the table */
#if defined(A)
    if (x > 1) {
#else
    if (x > 2) {
#endif
        x = PT__LOW_M(x) + pt__low_c(x); /* forward inside the section: allowed */
    }
    (void)s, (void)k;
    return x;
}
static int pt__low_c(int x) { return x * 2; }
static int pt__low_d(int x) {
    return pt__high_fn(x);
}
// >>high  the higher layer
static int pt__high_fn(int x) { return pt__low_b(0, x) + pt__low_a(x); }
void pt_high_pub(int x) { (void)pt__high_fn(x); }
EOF
got=$($CHECK "$syn" 2>&1)
rc=$?
want="$syn:30: section low calls pt__high_fn defined in later section high"
if [ "$rc" -eq 1 ] && [ "$got" = "$want" ]; then pass "layers: a synthetic forward call is reported, at its line, and no decoy"
else fail "layers: synthetic header" "exit $rc, expected exactly '$want', got:
$got"; fi
# without the forward call it passes
sed '30s/pt__high_fn(x)/x/' "$syn" >"$BUILD/layers_syn_ok.h"
got=$($CHECK "$BUILD/layers_syn_ok.h" 2>&1) && [ -z "$got" ] && pass "layers: the same header without it passes" ||
    fail "layers: synthetic header without the forward call" "exit status $?, output: $got"
# a forward use of a function's address (a hook installed from below) is reported too
sed '30s/pt__high_fn(x)/(int)(pt__high_fn != 0)/' "$syn" >"$BUILD/layers_syn_use.h"
got=$($CHECK "$BUILD/layers_syn_use.h" 2>&1)
case $got in *":30: section low uses pt__high_fn defined in later section high") pass "layers: a forward use of an address is reported" ;;
*) fail "layers: forward use" "not reported: $got" ;; esac

# 4. ptrain.h with one forward call added at the top of >>tensor
mut=$BUILD/layers_mut.h
awk '{ print } /^\/\/ >>tensor/ && !done { print "static void pt__layers_probe(pt_engine *e) { pt_engine_free(e); }"; done = 1 }' ptrain.h >"$mut"
line=$(grep -n '^static void pt__layers_probe' "$mut" | cut -d: -f1)
got=$($CHECK "$mut" 2>&1)
case $got in *"$mut:$line: section tensor calls pt_engine_free defined in later section engine"*)
    pass "layers: a forward call added to ptrain.h is reported" ;;
*) fail "layers: mutated ptrain.h" "the call at line $line was not reported: $(echo "$got" | head -n 5)" ;; esac

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
