# tests/mpi_lib.sh - shared by the test scripts: sourced after `cd` to the repository root with the
# build directory as $1. Sets BUILD, B (its path for running), CC, W (compile flags), the Open MPI
# environment, the pass/fail/have/prog helpers and NP/NF totals, and the MPI launch helpers
# have_mpi and mpi_run. PTRAIN_INC=DIR (or PT_INC) takes ptrain.h from DIR instead of the
# repository root.
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

# have_mpi: mpicc and mpirun are on PATH; if not, one failure naming the packages (status 1)
have_mpi() {
    have mpicc && have mpirun && return 0
    fail "MPI tests" "mpicc/mpirun not found: install openmpi-bin libopenmpi-dev (make deps)"
    return 1
}

# mpi_run [-t SECONDS] NP [MPIRUN_OPTION...] -- CMD [ARG...]: CMD on NP ranks, the way every test
# launches: bounded by `timeout SECONDS` (default 120; 0: unbounded, e.g. for a run in the
# background that is signalled), more ranks than cores allowed (--oversubscribe), waiting ranks
# yielding their core (--mca mpi_yield_when_idle 1), PTRAIN_THREADS and OMP_WAIT_POLICY passed on
# (-x) when set. The options (e.g. -x VAR=VALUE) come after -np NP; CMD may be `env VAR=VALUE PROG`
# or an MPMD list (PROG : -np N PROG2). Returns mpirun's exit status (124: the timeout).
mpi_run() {
    _mr_t=120
    if [ "$1" = -t ]; then
        _mr_t=$2
        shift 2
    fi
    _mr_np=$1
    shift
    _mr_x=""
    [ -n "${PTRAIN_THREADS+set}" ] && _mr_x="$_mr_x -x PTRAIN_THREADS"
    [ -n "${OMP_WAIT_POLICY+set}" ] && _mr_x="$_mr_x -x OMP_WAIT_POLICY"
    # the arguments in order, less the first "--"
    _mr_i=$# _mr_sep=0
    while [ "$_mr_i" -gt 0 ]; do
        _mr_a=$1
        shift
        if [ "$_mr_sep" = 0 ] && [ "$_mr_a" = -- ]; then _mr_sep=1; else set -- "$@" "$_mr_a"; fi
        _mr_i=$((_mr_i - 1))
    done
    # shellcheck disable=SC2086
    set -- mpirun --oversubscribe --mca mpi_yield_when_idle 1 $_mr_x -np "$_mr_np" "$@"
    [ "$_mr_t" = 0 ] || set -- timeout "$_mr_t" "$@"
    "$@"
}
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
