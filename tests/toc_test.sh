#!/bin/sh
# tests/toc_test.sh [BUILD_DIR] - the header's table of contents against its section markers.
# A section starts at a line "// >>name  title" (the one marker syntax); the manual's CONTENTS block
# lists every section, in file order, with its entry points. Checks, on ptrain.h:
#   - every marker name appears once as a marker, and the token ">>name" nowhere else in the file
#     (cross-references are written "see name"), so a search for it lands on the section at once;
#   - no other marker syntax is left ("/* >>name", a banner line "   >>name");
#   - the CONTENTS names are exactly the markers, in the same order;
#   - every entry point the CONTENTS names is defined in the file;
#   - the checker itself fails on a duplicated marker, an unlisted section and a stray ">>name"
#     (mutated copies in BUILD_DIR).
set -u
BUILD=${1:-build/tests}
mkdir -p "$BUILD" || exit 1
NP=0
NF=0
pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }

# check FILE: prints one problem per line (nothing when the file is consistent)
check() {
    f=$1
    markers=$(sed -n 's|^// >>\([a-z0-9_]*\).*|\1|p' "$f")
    toc=$(awk '/^   CONTENTS:/ { on = 1; next } on && /^\*\// { exit } on && /^   [a-z0-9_]+ +[A-Z(]/ { print $1 }' "$f")
    [ -n "$markers" ] || echo "no marker lines '// >>name' found"
    [ -n "$toc" ] || echo "no CONTENTS entries found"
    for m in $markers; do
        n=$(grep -c "^// >>$m\\b" "$f")
        [ "$n" -eq 1 ] || echo "marker >>$m appears $n times as a section start"
        other=$(grep -n ">>$m\\b" "$f" | grep -v "^[0-9]*:// >>$m\\b" | head -n 3 | tr '\n' ' ')
        [ -z "$other" ] || echo ">>$m is used outside its marker (write 'see $m'): $other"
        echo "$toc" | grep -qx "$m" || echo "section $m is not listed in CONTENTS"
    done
    for t in $toc; do
        echo "$markers" | grep -qx "$t" || echo "CONTENTS lists $t, but no line '// >>$t' starts a section"
    done
    [ "$(echo "$markers" | tr '\n' ' ')" = "$(echo "$toc" | tr '\n' ' ')" ] || echo "CONTENTS order differs from the markers' order"
    old=$(grep -n '^/\* >>[a-z]\|^   >>[a-z][a-z0-9_]*  ' "$f" | head -n 3 | tr '\n' ' ')
    [ -z "$old" ] || echo "old marker syntax left: $old"
    # entry points: the identifiers after "Entry:" in CONTENTS, each defined somewhere
    awk '/^   CONTENTS:/ { on = 1; next } on && /^\*\// { exit } on { print }' "$f" | tr ' ;:,' '\n\n\n\n' |
        awk 'BEGIN { e = 0 } /^Entry$/ { e = 1; next } e && /^pt_[a-z0-9_]*$/ { print } /\.$/ { e = e }' | sort -u >"$BUILD/toc_entries.txt"
    while read -r fn; do
        grep -q "^\(PTDEF\|static\|typedef\|struct\|#define\)[^;]*\\b$fn\\b" "$f" || grep -q "^[a-z_ ]*\\b$fn\\b *(" "$f" ||
            echo "CONTENTS names $fn, which is not defined in the file"
    done <"$BUILD/toc_entries.txt"
}

out=$(check ptrain.h)
if [ -z "$out" ]; then pass "ptrain.h: markers unique, CONTENTS lists every section in order, entry points exist"
else fail "ptrain.h" "$(echo "$out" | head -n 20)"; fi
n=$(grep -c '^// >>' ptrain.h)
[ "$n" -ge 20 ] && pass "ptrain.h has $n sections" || fail "section count" "only $n markers"
e=$(wc -l <"$BUILD/toc_entries.txt")
[ "$e" -ge 40 ] && pass "CONTENTS names $e entry points" || fail "entry points" "only $e named in CONTENTS"

# the checker must be able to fail
first=$(sed -n 's|^// >>\([a-z0-9_]*\).*|\1|p' ptrain.h | sed -n 3p)
sed "0,/^\/\/ >>$first\\b/s//\/\/ >>$first/; /^\/\/ >>$first\\b/p" ptrain.h >"$BUILD/toc_dup.h"
check "$BUILD/toc_dup.h" | grep -q "appears 2 times" && pass "a duplicated marker is reported" || fail "mutation" "duplicated marker not reported"
sed "s|^// >>$first\\b|// >>zz_unlisted|" ptrain.h >"$BUILD/toc_unlisted.h"
check "$BUILD/toc_unlisted.h" | grep -q "zz_unlisted is not listed" && pass "an unlisted section is reported" || fail "mutation" "unlisted section not reported"
sed "1a /* see >>$first for this */" ptrain.h >"$BUILD/toc_xref.h"
check "$BUILD/toc_xref.h" | grep -q ">>$first is used outside" && pass "a '>>name' cross-reference is reported" || fail "mutation" "stray >>name not reported"
sed "s|^   CONTENTS:|   CONTENTS:|; s|\\(Entry: \\)pt_|\\1pt_no_such_fn_ pt_|" ptrain.h >"$BUILD/toc_fn.h"
check "$BUILD/toc_fn.h" | grep -q "pt_no_such_fn_" && pass "an entry point that does not exist is reported" || fail "mutation" "missing entry point not reported"

echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
