#!/bin/sh
# tests/report_test.sh [BUILD_DIR] - tools/ptreport: builds it as `make tools` does (-Werror) and, unless
# NO_ASAN=1, with address/undefined sanitizers (the runs below use that build); tests/report_gen.c writes a
# synthetic JSON-lines log and Chrome trace and prints what they hold. Checks: every chart and the page
# written and well-formed (tag balance; xmllint too when installed), the loss and val-loss polylines have
# one point per finite value, a long run is cut to min/max per bucket, event markers and the events
# table, the summary's final loss and bubble fraction, the timeline's rows (one per rank) and boxes (one
# per event of the chosen step: the last complete one by default, or --step), a bare-array trace without
# its final ']'; a run under tools/ptrun (failures.svg: a row per failure, its stages and their
# durations; restart and failure marks on loss.svg, the steps done twice drawn apart; the page's Failures
# table and ptrun_end summary; a cut-off or key-less ptrun event); malformed logs and traces refused with
# FILE:LINE and what was expected, missing files named, never a crash. Prints PASS/FAIL lines, then "N passed, N failed". A few seconds.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build/tests}
T=$BUILD/report
mkdir -p "$T" || exit 1
CC=${CC:-cc}
INC=.
. tests/build_lib.sh
NP=0
NF=0
pass() { NP=$((NP + 1)); printf 'PASS %s\n' "$1"; }
fail() { NF=$((NF + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }
have() { command -v "$1" >/dev/null 2>&1; }
finish() {
    echo "$NP passed, $NF failed"
    [ "$NF" -eq 0 ]
    exit
}
# check NAME EXPECTED FOUND
check() { if [ "$2" = "$3" ]; then pass "$1 ($3)"; else fail "$1" "expected $2, found $3"; fi; }
# points FILE SERIES: the number of x,y pairs in that polyline's points attribute
points() { grep "data-series=\"$2\"" "$1" | sed 's/.* points="\([^"]*\)".*/\1/' | tr ' ' '\n' | grep -c ','; }
# field NAME: NAME=value from the generator's last output line
field() { tr ' ' '\n' <"$T/expect" | sed -n "s/^$1=//p"; }

# the builds start together (one core each); each is waited for where it is first needed
build_prog "$T/ptreport" tools/ptreport.c w+posix >"$T/build.log" 2>&1 &
p_b1=$!
$CC -std=c99 -O2 -Wall -Wextra tests/report_gen.c -o "$T/report_gen" -lm >"$T/gen.build.log" 2>&1 &
p_b2=$!
if wait $p_b1; then
    pass "tools/ptreport.c builds (-std=c99 -Wall -Wextra -Werror)"
else
    fail "build tools/ptreport.c" "$(head -n 20 "$T/build.log")"
    finish
fi
if ! wait $p_b2; then
    fail "build tests/report_gen.c" "$(head -n 20 "$T/gen.build.log")"
    finish
fi
R=$T/ptreport
if [ "${NO_ASAN:-0}" != 1 ] &&
    $CC -std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer $PT_OWN -I. tools/ptreport.c -o "$T/ptreport_asan" -lm >"$T/asan.build.log" 2>&1; then
    R=$T/ptreport_asan
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fi
G=$T/report_gen

# ---- a 300-step run on 4 ranks and a 4-stage trace ----
"$G" log "$T/run.jsonl" 300 50 4 >"$T/expect.log" || fail "report_gen log" "exit $?"
"$G" trace "$T/trace.json" 4 4 3 >"$T/expect.trace" || fail "report_gen trace" "exit $?"
cp "$T/expect.log" "$T/expect"
rm -rf "$T/out"
"$R" "$T/run.jsonl" --trace "$T/trace.json" -o "$T/out" >"$T/run.out" 2>&1
rc=$?
missing=""
for f in loss tokens mfu grad_norm lr time memory timeline; do [ -s "$T/out/$f.svg" ] || missing="$missing $f.svg"; done
[ -s "$T/out/index.html" ] || missing="$missing index.html"
if [ $rc -eq 0 ] && [ -z "$missing" ]; then pass "ptreport writes 8 charts and index.html"
else fail "ptreport on the synthetic run" "exit $rc, missing:$missing; $(head -c 600 "$T/run.out")"; fi
if "$G" wellformed "$T"/out/*.svg "$T/out/index.html" >"$T/wf.log" 2>&1; then pass "every SVG and the page are well-formed (tag balance)"
else fail "well-formed" "$(head -n 5 "$T/wf.log")"; fi
if have xmllint; then
    bad=""
    for f in "$T"/out/*.svg; do xmllint --noout "$f" >/dev/null 2>&1 || bad="$bad $(basename "$f")"; done
    if [ -z "$bad" ]; then pass "xmllint accepts every SVG"; else fail "xmllint" "rejects$bad"; fi
fi
check "loss polyline: one point per finite loss" "$(field loss_points)" "$(points "$T/out/loss.svg" loss)"
check "val-loss polyline: one point per val_loss" "$(field val_points)" "$(points "$T/out/loss.svg" 'val loss')"
check "event markers on the loss chart (events with a step)" "$(field event_markers)" "$(grep -c 'class="event"' "$T/out/loss.svg")"
check "events table rows" "$(field events)" "$(sed -n '/<table class="events">/,/<\/table>/p' "$T/out/index.html" | grep -c '^<tr><td')"
for e in nan spike rollback ckpt_save replica_mismatch; do
    grep -q "data-event=\"$e\"" "$T/out/loss.svg" || [ $e = replica_mismatch ] || fail "marker $e" "not on the loss chart"
    grep -q ">$e</td>" "$T/out/index.html" || fail "event $e" "not in the events table"
done
check "summary: final loss" "$(field final_loss)" "$(sed -n 's/.*final loss<\/th><td>\([0-9.]*\) .*/\1/p' "$T/out/index.html")"
check "summary: bubble fraction %" "$(field bubble_pct)" "$(sed -n 's/.*bubble fraction<\/th><td>\([0-9.]*\)%.*/\1/p' "$T/out/index.html")"
if grep -q '<th>layout.pp</th><td>4</td>' "$T/out/index.html" && grep -q 'gpt &quot;tiny&quot; é' "$T/out/index.html" &&
    grep -q '<th>mfu_formula</th>' "$T/out/index.html"; then pass "config table: nested keys flattened, escapes decoded and HTML-escaped"
else fail "config table" "layout.pp, the model name or mfu_formula missing"; fi
check "memory chart: one bar per rank" 4 "$(grep -c 'class="bar"' "$T/out/memory.svg")"

cp "$T/expect.trace" "$T/expect"
check "timeline: the last complete step by default" "$(field step)" "$(sed -n 's/.*Pipeline timeline, step \([0-9]*\)<.*/\1/p' "$T/out/timeline.svg")"
check "timeline: one row per rank" "$(field ranks)" "$(grep -c 'class="row"' "$T/out/timeline.svg")"
check "timeline: one box per trace event of the step" "$(field events)" "$(grep -c 'class="ev"' "$T/out/timeline.svg")"
check "timeline: micro-batch numbers in the forward/backward boxes" $((4 * 2 * 4)) "$(grep -c 'class="mb"' "$T/out/timeline.svg")"
"$R" "$T/run.jsonl" --trace "$T/trace.json" --step 0 -o "$T/out0" >"$T/step0.out" 2>&1
check "timeline --step 0: every event of step 0" "$(field events)" "$(grep -c 'class="ev"' "$T/out0/timeline.svg" 2>/dev/null)"
"$R" "$T/run.jsonl" --trace "$T/trace.json" --step 99 -o "$T/out99" >"$T/step99.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q 'step 99' "$T/step99.out"; then pass "--step 99 (not in the trace): exit 1 naming it"
else fail "--step 99" "exit $rc: $(head -c 300 "$T/step99.out")"; fi
# a run ending in an evaluation (forward only, step 1) after its last training step (step 0): the
# default timeline is the training step
cat >"$T/eval.json" <<'EOT'
{"traceEvents":[
{"name":"forward","cat":"forward","ph":"X","ts":0,"dur":10,"pid":0,"tid":0,"args":{"step":0,"mb":0}},
{"name":"backward","cat":"backward","ph":"X","ts":10,"dur":20,"pid":0,"tid":0,"args":{"step":0,"mb":0}},
{"name":"forward","cat":"forward","ph":"X","ts":5,"dur":10,"pid":1,"tid":0,"args":{"step":0,"mb":0}},
{"name":"backward","cat":"backward","ph":"X","ts":15,"dur":20,"pid":1,"tid":0,"args":{"step":0,"mb":0}},
{"name":"forward","cat":"forward","ph":"X","ts":40,"dur":10,"pid":0,"tid":0,"args":{"step":1,"mb":0}},
{"name":"forward","cat":"forward","ph":"X","ts":45,"dur":10,"pid":1,"tid":0,"args":{"step":1,"mb":0}}
]}
EOT
"$R" "$T/run.jsonl" --trace "$T/eval.json" -o "$T/oute" >"$T/eval.out" 2>&1
check "timeline: the last training step (with a backward), not a later evaluation" 0 "$(sed -n 's/.*Pipeline timeline, step \([0-9]*\)<.*/\1/p' "$T/oute/timeline.svg")"
"$G" trace "$T/bare.json" 2 3 2 bare >"$T/expect"
"$R" "$T/run.jsonl" --trace "$T/bare.json" -o "$T/outb" >"$T/bare.out" 2>&1
check "bare-array trace without its final ']': boxes of the last complete step" "$(field events)" "$(grep -c 'class="ev"' "$T/outb/timeline.svg" 2>/dev/null)"

# ---- a long run: the polyline keeps min and max per bucket (400 buckets) ----
"$G" log "$T/long.jsonl" 20000 1000 2 >"$T/expect"
"$R" "$T/long.jsonl" -o "$T/outl" >"$T/long.out" 2>&1
check "20000 steps: loss polyline cut to 2 x 400 points" 800 "$(points "$T/outl/loss.svg" loss)"
check "20000 steps: val loss keeps its points" "$(field val_points)" "$(points "$T/outl/loss.svg" 'val loss')"
size=$(wc -c <"$T/outl/loss.svg")
if [ "$size" -lt 100000 ] && [ "$(grep -c 'class="bar"' "$T/outl/time.svg")" -le $((200 * 6)) ]; then pass "20000 steps: loss.svg $size bytes (200 event markers), time.svg at most 200 bars"
else fail "long run SVG sizes" "loss.svg $size bytes"; fi
[ -e "$T/outl/timeline.svg" ] && fail "no --trace" "timeline.svg written anyway"

# ---- malformed input: FILE:LINE and what was expected; never a crash ----
# bad NAME LINE EXPECTED-TEXT CONTENT...: a log whose line LINE is broken
bad() {
    name=$1 line=$2 want=$3
    shift 3
    printf '%s\n' "$@" >"$T/bad.jsonl"
    "$R" "$T/bad.jsonl" -o "$T/outbad" >"$T/bad.out" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "bad.jsonl:$line: expected $want" "$T/bad.out"; then pass "malformed log ($name): $(sed -n 's/^ptreport: //p' "$T/bad.out" | sed "s|.*bad.jsonl|bad.jsonl|")"
    else fail "malformed log ($name)" "exit $rc: $(head -c 400 "$T/bad.out")"; fi
}
OK='{"step":1,"loss":2.5}'
bad "missing comma" 2 "',' or '}'" "$OK" '{"step":2 "loss":2.4}'
bad "unterminated string" 3 "'\"' closing" "$OK" "$OK" '{"event":"nan'
bad "bad escape" 1 "an escape" '{"event":"a\qb"}'
bad "bad \\u" 1 "4 hex digits" '{"event":"\u12G4"}'
bad "trailing text" 2 "the end of the text" "$OK" '{"step":2} x'
bad "not an object" 2 "'{'" "$OK" '[1,2]'
bad "truncated number" 1 "a digit after '.'" '{"step":1.}'
bad "a bare word" 1 "a value" '{"step":truth}'
bad "a missing value" 1 "a value" '{"step":}'
bad "a raw tab in a string" 1 "a string character" "$(printf '{"event":"a\tb"}')"
bad "bytes that are not UTF-8" 1 "UTF-8 text" "$(printf '{"event":"\303("}')"
bad "a lone low surrogate" 1 "a high surrogate" '{"event":"\udc00"}'
bad "a number past the range of a double" 1 "a number of at most about 1.8e308" '{"step":1e999}'
bad "a key's value missing in a nested object (path named)" 1 "a value, found '}' at byte 18 (in a.b\[1\].c)" '{"a":{"b":[0,{"c":}]}}'
deep=$(awk 'BEGIN { for (i = 0; i < 5000; i++) printf "["; }')
bad "5000 nested arrays" 1 "at most 200 levels" "{\"a\":$deep"
# a run killed while writing its log leaves the last line cut off (no newline): a warning naming the
# file and the line, the report of the lines before it; a cut-off line with lines after it (and a
# broken last line that has its newline) is still an error
printf '%s\n%s\n%s' '{"step":1,"loss":2.5}' '{"step":2,"loss":2.25}' '{"step":3,"lo' >"$T/torn.jsonl"
rm -rf "$T/outtorn"
"$R" "$T/torn.jsonl" -o "$T/outtorn" >"$T/torn.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q 'torn.jsonl: line 3 is cut off (a killed run?); read the 2 lines before it' "$T/torn.out" &&
    grep -q 'final loss</th><td>2.2500 (step 2)' "$T/outtorn/index.html" 2>/dev/null; then pass "a log whose last line is cut off: warning naming line 3, report of lines 1-2"
else fail "torn last line" "exit $rc: $(head -c 400 "$T/torn.out")"; fi
bad "a cut-off line followed by more lines" 2 "':'" "$OK" '{"step":2,"lo{"step":3,"loss":2.4}' "$OK"
bad "a broken last line with its newline" 2 "a value" "$OK" '{"step":2,"loss":}'
# a run killed before its first step: the header alone (or nothing) is a report without charts
printf '%s\n' '{"event":"run_start","config":{"model":"m"}}' >"$T/nostep.jsonl"
: >"$T/empty.jsonl"
for f in nostep empty; do
    rm -rf "$T/out$f"
    "$R" "$T/$f.jsonl" -o "$T/out$f" >"$T/$f.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'no step lines in the log' "$T/out$f/index.html" 2>/dev/null; then pass "a log without step lines ($f): the page, no charts"
    else fail "a log without step lines ($f)" "exit $rc: $(head -c 400 "$T/$f.out")"; fi
done
# refused NAME PATTERN ARG...: ptreport ARG... exits 1 saying PATTERN
refused() {
    name=$1 want=$2
    shift 2
    "$R" "$@" -o "$T/outref" >"$T/refused.out" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "$want" "$T/refused.out"; then pass "$name"
    else fail "$name" "exit $rc: $(head -c 400 "$T/refused.out")"; fi
}
# integers past their range are refused (FILE:LINE, the key, what was expected and found), not cast
printf '%s\n%s\n' "$OK" '{"step":2,"loss":2.4,"straggler_rank":1e300}' >"$T/absurd.jsonl"
refused "log: straggler_rank 1e300 refused with FILE:LINE" 'absurd.jsonl:2: straggler_rank: expected an integer -1..2147483647, found 1e+300' "$T/absurd.jsonl"
printf '{"traceEvents":[\n{"ph":"X","ts":1,"dur":2,"pid":0,"args":{"step":0}},\n{"ph":"M","name":"process_name","pid":-5e9,"args":{"name":"r"}},\n{"ph":"X","ts":1,"dur":2,"pid":0,"args":{"mb":1.5}}\n]}\n' >"$T/absurd.json"
refused "trace: pid -5e9 refused with FILE:LINE" 'absurd.json:3: pid: expected an integer -2147483648..2147483647, found -5000000000' "$T/run.jsonl" --trace "$T/absurd.json"
sed -i '3d' "$T/absurd.json"
refused "trace: args.mb 1.5 refused with FILE:LINE" 'absurd.json:3: mb: expected an integer -1..2147483647, found 1.5' "$T/run.jsonl" --trace "$T/absurd.json"
printf '{"traceEvents":[\n{"ph":"X","ts":1,"dur":2,"pid":0,"args":{"step":0}},\n{"ph":"X","ts":1,"dur":2 "pid":0}\n]}\n' >"$T/badtrace.json"
"$R" "$T/run.jsonl" --trace "$T/badtrace.json" -o "$T/outbt" >"$T/badtrace.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "badtrace.json:3: expected ',' or '}'" "$T/badtrace.out"; then pass "malformed trace: exit 1, badtrace.json:3 and what was expected"
else fail "malformed trace" "exit $rc: $(head -c 400 "$T/badtrace.out")"; fi
head -c 3000 "$T/trace.json" >"$T/cut.json"
"$R" "$T/run.jsonl" --trace "$T/cut.json" -o "$T/outcut" >"$T/cut.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cut.json:[0-9]*: expected" "$T/cut.out"; then pass "a trace cut mid-object: exit 1 with FILE:LINE"
else fail "cut trace" "exit $rc: $(head -c 400 "$T/cut.out")"; fi
# ---- a run under tools/ptrun: two failures (an injected kill shrinking dp 2->1; a hang, same layout) ----
"$G" ptrun "$T/ptrun.jsonl" >"$T/expect" || fail "report_gen ptrun" "exit $?"
rm -rf "$T/outp"
"$R" "$T/ptrun.jsonl" -o "$T/outp" >"$T/ptrun.out" 2>&1
rc=$?
P=$T/outp
if [ $rc -eq 0 ] && [ -s "$P/failures.svg" ] && [ -s "$P/loss.svg" ]; then pass "a supervised run: failures.svg and loss.svg written"
else fail "ptrun log" "exit $rc: $(head -c 400 "$T/ptrun.out")"; fi
if "$G" wellformed "$P/failures.svg" "$P/loss.svg" "$P/index.html" >"$T/wf.log" 2>&1 && { ! have xmllint || xmllint --noout "$P/failures.svg" "$P/loss.svg" >/dev/null 2>&1; }; then
    pass "failures.svg, loss.svg and the page are well-formed"
else fail "well-formed (ptrun)" "$(head -n 5 "$T/wf.log")"; fi
missing=""
check "failures.svg: one row per failure" "$(field failures)" "$(grep -c 'class="failure-row"' "$P/failures.svg")"
check "failures.svg: a segment per stage reached (4 + 3: the hang has no fault stamp)" 7 "$(grep -c 'class="stage"' "$P/failures.svg")"
for want in 'attempt 1 · kill, seen as died · rank 3@b · step 17<' 'attempt 2 · hung · rank 0@a · step 25 \*<' \
    'dp 2 tp 1 pp 2 accum 1 → dp 1 accum 2 · hosts a,b → a · restart 1 of 5 from step 15 · 2 steps lost' \
    'dp 1 tp 1 pp 2 accum 2 (unchanged) · hosts a · restart 2 of 5 from step 20 · 5 steps lost' \
    '>0.41 s<' '>1.19 s<' '>1.10 s<' '>6.40 s<' '>2.50 s<' '>1.50 s<' '>6.25 s<' 'recovered: 9.10 s<' 'recovered: 10.25 s<'; do
    grep -q "$want" "$P/failures.svg" || missing="$missing '$want'"
done
if [ -z "$missing" ]; then pass "failures.svg: row labels (attempt, kind, rank@host, step, layout before → after) and the stage durations"
else fail "failures.svg labels" "missing$missing"; fi
check "loss.svg: a restart line per relaunch" "$(field restarts)" "$(grep -c 'class="restart"' "$P/loss.svg")"
check "loss.svg: a failure line per failure" "$(field failures)" "$(grep -c 'class="failure"' "$P/loss.svg")"
check "loss.svg: the steps done twice shaded" "$(field failures)" "$(grep -c 'class="redone"' "$P/loss.svg")"
if grep -q '>restart 1 (dp 2→1, accum 1→2)</text>' "$P/loss.svg" && grep -q '>restart 2 (same layout)</text>' "$P/loss.svg"; then
    pass "loss.svg: restart labels with the layout change"
else fail "restart labels" "$(grep -o '>restart[^<]*<' "$P/loss.svg" | head -3)"; fi
check "loss.svg: no ordinary marker for the supervisor's events" 0 "$(grep -c 'data-event="ptrun_' "$P/loss.svg")"
check "loss polyline: one point per step kept (no zigzag back to the resume step)" "$(field kept_points)" "$(points "$P/loss.svg" loss)"
check "loss: the steps done again, faded, one polyline per failure" "$(field redone_lines)" "$(grep -c 'data-series="loss (done again)"' "$P/loss.svg")"
check "loss: points of the faded polylines (each from the kept point before it)" "$(field redone_points)" "$(points "$P/loss.svg" 'loss (done again)')"
xs=$(grep 'data-series="loss"' "$P/loss.svg" | sed 's/.* points="\([^"]*\)".*/\1/' | tr ' ' '\n' | cut -d, -f1 | awk 'NR > 1 && $1 <= p { bad = 1 } { p = $1 } END { print bad ? "back" : "rising" }')
check "loss polyline: x always rising" rising "$xs"
tbl=$(sed -n '/<table class="failures">/,/<\/table>/p' "$P/index.html")
check "index.html: Failures table rows" "$(field failures)" "$(printf '%s\n' "$tbl" | grep -c '^<tr><td')"
printf '%s\n' "$tbl" | grep -q '<tr><td>1</td><td>1</td><td title="channel closed without bye">kill (died)</td><td>rank 3@b</td><td>17</td><td>0.41</td><td>1.60</td><td>2.70</td><td>9.10</td><td>2</td><td>15</td><td>dp 2 tp 1 pp 2 accum 1 (hosts a,b) → dp 1 tp 1 pp 2 accum 2 (hosts a)</td>' &&
    printf '%s\n' "$tbl" | grep -q '<tr><td>2 \*</td><td>2</td><td title="no heartbeat for 10 s">hung</td><td>rank 0@a</td><td>25</td><td></td><td>2.50</td><td>4.00</td><td>10.25</td><td>5</td><td>20</td>' &&
    pass "index.html: the Failures table's numbers (detected, torn down, relaunched, recovered after; steps lost; layouts)" ||
    fail "Failures table" "$(printf '%s\n' "$tbl" | head -c 900)"
if grep -q '<th>restarts</th><td>2</td>' "$P/index.html" && grep -q '<th>steps lost</th><td>7</td>' "$P/index.html" &&
    grep -q '<th>time lost</th><td>19.35 s</td>' "$P/index.html" && grep -q '<th>finished</th><td>ok</td>' "$P/index.html" &&
    grep -q '<th>restarts</th><td>2, 7 steps lost, 19.4 s lost; finished ok</td>' "$P/index.html"; then pass "index.html: ptrun_end's summary (restarts, steps lost, time lost, ok)"
else fail "ptrun_end summary" "$(grep -o '<th>[a-z ]*</th><td>[^<]*</td>' "$P/index.html" | head -20 | tr '\n' ' ')"; fi
grep -q '<td>1</td><td>9</td><td>rank 1@a</td><td>0.52</td><td>0.11</td><td>4.7×</td>' "$P/index.html" && pass "index.html: the straggler listed" ||
    fail "stragglers" "$(sed -n '/class="stragglers"/,/<\/table>/p' "$P/index.html" | head -c 400)"
# a log without ptrun events: as before (no failures.svg, no Failures section, one loss polyline)
if [ ! -e "$T/out/failures.svg" ] && ! grep -q 'Failures\|class="restart"' "$T/out/index.html" && ! grep -q 'done again' "$T/out/loss.svg"; then
    pass "a log without ptrun events: no failures.svg, no Failures section, no restart marks"
else fail "no ptrun events" "failures.svg or restart marks written"; fi
# the supervisor's last line cut off (a killed ptrun): a warning, the failures before it
head -c -20 "$T/ptrun.jsonl" >"$T/ptcut.jsonl"
rm -rf "$T/outpc"
"$R" "$T/ptcut.jsonl" -o "$T/outpc" >"$T/ptcut.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q 'ptcut.jsonl: line [0-9]* is cut off' "$T/ptcut.out" && [ "$(grep -c 'class="failure-row"' "$T/outpc/failures.svg" 2>/dev/null)" = 2 ] &&
    grep -q 'no ptrun_end line' "$T/outpc/index.html"; then pass "a cut-off ptrun_end: warning, both failures, no end summary"
else fail "cut-off ptrun event" "exit $rc: $(head -c 400 "$T/ptcut.out")"; fi
# events without most of their keys: what is there is drawn
printf '%s\n' '{"event":"run_start"}' '{"step":0,"loss":3}' '{"step":1,"loss":2.9}' '{"step":2,"loss":2.8}' '{"event":"ptrun_detected"}' \
    '{"event":"ptrun_teardown","wall":"later","seconds":0.5}' '{"event":"ptrun_relaunch","step":1}' '{"step":1,"loss":2.85}' '{"step":2,"loss":2.75}' \
    '{"event":"ptrun_recovered","recover_s":3}' '{"event":"ptrun_straggler"}' '{"event":"ptrun_end"}' >"$T/ptbare.jsonl"
rm -rf "$T/outpb"
"$R" "$T/ptbare.jsonl" -o "$T/outpb" >"$T/ptbare.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c 'class="failure-row"' "$T/outpb/failures.svg" 2>/dev/null)" = 1 ] && grep -q '>restart 1</text>' "$T/outpb/loss.svg" &&
    grep -q 'recovered: 3.00 s' "$T/outpb/failures.svg" && grep -q '<td>1 \*</td><td></td><td>failure</td><td></td><td></td><td></td><td>0.50</td><td></td><td>3.00</td>' "$T/outpb/index.html" &&
    "$G" wellformed "$T/outpb/failures.svg" "$T/outpb/loss.svg" "$T/outpb/index.html" >/dev/null; then pass "ptrun events missing most keys: one failure drawn from what is there"
else fail "ptrun events without keys" "exit $rc: $(head -c 400 "$T/ptbare.out") $(grep -o '<tr><td>1 \*.*' "$T/outpb/index.html" | head -c 300)"; fi
printf '%s\n' "$OK" '{"event":"ptrun_relaunch","step":1,"attempt":2.5}' >"$T/ptbad.jsonl"
refused "ptrun: attempt 2.5 refused with FILE:LINE" 'ptbad.jsonl:2: attempt: expected an integer 0..2147483647, found 2.5' "$T/ptbad.jsonl"
printf '%s\n' "$OK" '{"event":"ptrun_relaunch","step":1,"dp":0}' >"$T/ptbad.jsonl"
refused "ptrun: dp 0 refused with FILE:LINE" 'ptbad.jsonl:2: dp: expected an integer 1..2147483647, found 0' "$T/ptbad.jsonl"
"$R" "$T/missing.jsonl" -o "$T/outm" >"$T/missing.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot open .*missing.jsonl" "$T/missing.out"; then pass "a missing log: exit 1 naming it"
else fail "missing log" "exit $rc: $(head -c 300 "$T/missing.out")"; fi
"$R" "$T/run.jsonl" --trace "$T/missing.json" -o "$T/outm" >"$T/missingt.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot open .*missing.json" "$T/missingt.out"; then pass "a missing trace: exit 1 naming it"
else fail "missing trace" "exit $rc: $(head -c 300 "$T/missingt.out")"; fi
"$R" "$T/run.jsonl" >"$T/usage.out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q '^usage: ptreport' "$T/usage.out"; then pass "no -o: usage, exit 2"; else fail "usage" "exit $rc"; fi
finish
