# tests/mpi_lib.sh - shared by the MPI test scripts (dist, dp, tp): sourced after `cd` to the
# repository root with the build directory as $1. Sets BUILD, B (its path for running), CC, W
# (compile flags), the Open MPI environment, and the pass/fail/have/prog helpers and NP/NF totals.
# PTRAIN_INC=DIR (or PT_INC) takes ptrain.h from DIR instead of the repository root.
BUILD=${1:-build/tests}
mkdir -p "$BUILD" || exit 1
CC=${CC:-cc}
INC=${PTRAIN_INC:-${PT_INC:-.}}
NP=0
NF=0
W="-std=c99 -O2 -Wall -Wextra -Werror -I$INC"
# Open MPI: allow root (containers) and more ranks than cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }
have() { command -v "$1" >/dev/null 2>&1; }
case $BUILD in /*) B=$BUILD ;; *) B=./$BUILD ;; esac

# prog NAME LOG CMD...: runs a test program, adds its "N passed, N failed" to the totals
prog() {
    name=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1
    rc=$?
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$last" ]; then
        fail "$name" "no final line (exit status $rc; 124 = timeout); last lines of $log:"
        tail -n 15 "$log" | sed 's/^/    /'
        return
    fi
    p=$(echo "$last" | cut -d' ' -f1)
    f=$(echo "$last" | cut -d' ' -f3)
    NP=$((NP + p))
    NF=$((NF + f))
    if [ "$f" -eq 0 ] && [ "$rc" -eq 0 ]; then
        echo "PASS $name ($p checks)"
    else
        [ "$f" -eq 0 ] && NF=$((NF + 1))
        echo "FAIL $name: $f of $((p + f)) checks failed, exit status $rc"
        grep -E '^(FAIL |  rank )' "$log" | head -n 30 | sed 's/^/    /'
    fi
}
