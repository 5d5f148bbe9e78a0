#!/bin/sh
# prepare_text.sh - a small byte-level English corpus from the Debian fortune cookies.
#
# Usage: sh tools/prepare_text.sh OUTDIR [SOURCE_DIR]
#
# Reads the plain fortune files of SOURCE_DIR (default /usr/share/games/fortunes, from the Debian
# packages fortunes-min and fortunes): only the files directly in it, never subdirectories (off/
# holds the off-color ones, de/, fr/, ... other languages), not the *.dat index files and not the
# *.u8 links. For the default directory, when dpkg-query is there, only the files of the packages
# fortunes and fortunes-min are used, so other installed fortune packages do not change the corpus.
# Fortunes are separated by lines holding only "%". Each fortune is written without those lines,
# its leading and trailing blank lines trimmed, terminal overstriking (X backspace Y) reduced to
# the final character, and followed by one blank line. Files are read in C-locale name order;
# fortune number k (from 0, over all files) goes to OUTDIR/val.txt when k % 20 == 19 (5%), else
# to OUTDIR/train.txt. The same sources always give the same bytes.
#
# Idempotent: does nothing when both outputs exist and are newer than every source file.
# Atomic: writes temporary files in OUTDIR and renames them into place.
#
# The training programs make the same corpus without a shell: pt_run_prepare_fortunes (the harness
# part of ptrain.h) is this script in C, and tests/examples_test.sh checks that both write the same
# bytes, on the installed fortunes and on a directory of edge cases. Change the two together.
set -eu

LC_ALL=C
export LC_ALL

DEFAULT_SRC=/usr/share/games/fortunes
prog=prepare_text.sh

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ -z "$1" ]; then
    echo "usage: sh tools/prepare_text.sh OUTDIR [SOURCE_DIR]   (SOURCE_DIR defaults to $DEFAULT_SRC)" >&2
    exit 2
fi
out=$1
src=${2:-$DEFAULT_SRC}

if [ ! -d "$src" ]; then
    echo "$prog: the fortune directory $src does not exist." >&2
    echo "  install the Debian package fortunes: apt-get install fortunes (or make deps)" >&2
    exit 1
fi

# The package file list (default directory only), one path per line.
pkgfiles=
if [ "$src" = "$DEFAULT_SRC" ] && command -v dpkg-query >/dev/null 2>&1; then
    pkgfiles=$(dpkg-query -L fortunes fortunes-min 2>/dev/null || true)
fi

# Collect the source files into the positional parameters (the glob is sorted, C locale).
set --
for f in "$src"/*; do
    [ -f "$f" ] || continue        # not directories (off/, de/, ...)
    [ -L "$f" ] && continue        # not the *.u8 links
    case ${f##*/} in
        *.dat | *.u8 | .* | *~ | *.gz) continue ;;
    esac
    if [ -n "$pkgfiles" ] && ! printf '%s\n' "$pkgfiles" | grep -Fqx "$f"; then
        continue                   # installed by another package
    fi
    set -- "$@" "$f"
done
if [ $# -eq 0 ]; then
    echo "$prog: no fortune files in $src." >&2
    echo "  install the Debian package fortunes: apt-get install fortunes (or make deps)" >&2
    exit 1
fi

train=$out/train.txt
val=$out/val.txt

report() {
    tb=$(wc -c <"$train" | tr -d ' ')
    vb=$(wc -c <"$val" | tr -d ' ')
    echo "$train: $tb bytes"
    echo "$val: $vb bytes"
}

# Up to date? Both outputs exist and no source file is newer than either of them.
if [ -f "$train" ] && [ -f "$val" ]; then
    stale=
    for f in "$@"; do
        if [ -n "$(find "$f" -prune -newer "$train")" ] || [ -n "$(find "$f" -prune -newer "$val")" ]; then
            stale=1
            break
        fi
    done
    if [ -z "$stale" ]; then
        echo "$prog: $out is up to date ($# source files in $src)"
        report
        exit 0
    fi
fi

mkdir -p "$out"
tmp_train=$out/.train.txt.tmp.$$
tmp_val=$out/.val.txt.tmp.$$
trap 'rm -f "$tmp_train" "$tmp_val"' EXIT
trap 'exit 1' HUP INT TERM

awk -v train="$tmp_train" -v val="$tmp_val" '
function flush(    s, e, i, text, dest) {
    s = 1
    e = nl
    while (s <= e && lines[s] ~ /^[ \t]*$/) s++
    while (e >= s && lines[e] ~ /^[ \t]*$/) e--
    if (s <= e) {
        text = lines[s]
        for (i = s + 1; i <= e; i++) text = text "\n" lines[i]
        dest = (count % 20 == 19) ? val : train
        printf "%s\n\n", text > dest
        if (dest == val) nval++
        count++
    }
    nl = 0
}
BEGIN { count = 0; nval = 0; nl = 0 }
FNR == 1 && NR > 1 { flush() }
{
    sub(/\r$/, "")
    if ($0 == "%") { flush(); next }
    while (gsub(/[^\010]\010/, "")) ;   # overstriking: "_\bA" and "A\bA" print as "A"
    gsub(/\010/, "")
    lines[++nl] = $0
}
END {
    flush()
    printf "" > train
    printf "" > val
    close(train)
    close(val)
    printf "%d fortunes: %d for training, %d for validation\n", count, count - nval, nval
}' "$@"

mv -f "$tmp_train" "$train"
mv -f "$tmp_val" "$val"
trap - EXIT
echo "$prog: built $out from $# files in $src"
report
