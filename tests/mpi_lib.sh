# tests/mpi_lib.sh - shared by the test scripts: sourced after `cd` to the repository root with the
# build directory as $1. Sets BUILD, B (its path for running), CC, W (compile flags), the Open MPI
# environment, the pass/fail/have/prog helpers and NP/NF totals, the MPI launch helpers
# have_mpi and mpi_run, build_bg (compiles in the background), impl_compiles and soak, and from
# tests/build_lib.sh build_prog (a program linked to the implementation compiled once per
# configuration) and impl_obj. PTRAIN_INC=DIR (or PT_INC)
# takes ptrain.h from DIR instead of the repository root. SOAK=1 (make soak, tests/soak.sh): the
# scripts also run their long variants (full layout sweeps, larger runs) that make test leaves out.
# PT_MPI=mpich (tests/mpich_test.sh, make test MPI=mpich): the scripts that support it (equiv_test,
# ckpt_test) build with MPICC (mpicc.mpich) and launch with MPIEXEC (mpiexec.mpich, Hydra's flags);
# default PT_MPI=openmpi: mpicc / mpirun as the Debian alternatives give them (Open MPI). docs/mpi.md.
BUILD=${1:-build/tests}
mkdir -p "$BUILD" || exit 1
CC=${CC:-cc}
INC=${PTRAIN_INC:-${PT_INC:-.}}
NP=0
NF=0
W="-std=c99 -O2 -Wall -Wextra -Werror -I$INC"
. tests/build_lib.sh
# Open MPI: allow root (containers) and more ranks than cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# the MPI implementation: its compiler wrappers and launcher (named explicitly for MPICH, so the
# Debian alternatives mpicc / mpirun stay Open MPI's)
PT_MPI=${PT_MPI:-openmpi}
case $PT_MPI in
mpich) MPICC=${MPICC:-mpicc.mpich} MPICXX=${MPICXX:-mpicxx.mpich} MPIEXEC=${MPIEXEC:-mpiexec.mpich} MPI_PKGS="mpich libmpich-dev" ;;
*) MPICC=${MPICC:-mpicc} MPICXX=${MPICXX:-mpicxx} MPIEXEC=${MPIEXEC:-mpirun} MPI_PKGS="openmpi-bin libopenmpi-dev" ;;
esac
export PT_MPI MPICC MPICXX MPIEXEC

pass() { NP=$((NP + 1)); echo "PASS $1"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }
have() { command -v "$1" >/dev/null 2>&1; }
# soak: true under SOAK=1, where a script runs its long variants too
soak() { [ "${SOAK:-0}" = 1 ]; }

# build_bg LOG CMD...: starts the compile CMD in the background, its output in LOG; $! is its pid and
# `wait PID` its exit status. A script starts its builds together (each compile is one core) and waits
# for each where it is first needed.
build_bg() {
    _bb_log=$1
    shift
    "$@" >"$_bb_log" 2>&1 &
}

# have_mpi: MPICC and MPIEXEC are on PATH; if not, one failure naming the packages (status 1)
have_mpi() {
    have "$MPICC" && have "$MPIEXEC" && return 0
    fail "MPI tests ($PT_MPI)" "$MPICC/$MPIEXEC not found: install $MPI_PKGS (make deps)"
    return 1
}
# mpich: true when the scripts run under MPICH (PT_MPI=mpich)
mpich() { [ "$PT_MPI" = mpich ]; }
# mpi_fits NP: NP ranks may run here. Always under Open MPI (its waiting ranks yield the core:
# mpi_yield_when_idle). Under MPICH only NP <= the CPUs (nproc): Debian 12's MPICH 4.0.2 (ch4:ucx)
# busy-polls in every blocking call and has no setting that yields (MPIR_CVAR_POLLS_BEFORE_YIELD is
# ch3:nemesis only), so oversubscribed ranks crawl (docs/mpi.md: 2000 allreduces of 4 KB at 4 ranks
# on 2 cores took 41 s, at 2 ranks 0.06 s). PT_MPICH_OVERSUBSCRIBE=1 runs them anyway.
mpi_fits() {
    mpich || return 0
    [ "${PT_MPICH_OVERSUBSCRIBE:-0}" = 1 ] && return 0
    [ "$1" -le "$(nproc 2>/dev/null || echo 1)" ]
}

# mpi_run [-t SECONDS] NP [MPIRUN_OPTION...] -- CMD [ARG...]: CMD on NP ranks, the way every test
# launches: bounded by `timeout SECONDS` (default 120; 0: unbounded, e.g. for a run in the
# background that is signalled), more ranks than cores allowed (--oversubscribe), waiting ranks
# yielding their core (--mca mpi_yield_when_idle 1), PTRAIN_THREADS and OMP_WAIT_POLICY passed on
# (-x) when set. The options (e.g. -x VAR=VALUE) come after -np NP; CMD may be `env VAR=VALUE PROG`
# or an MPMD list (PROG : -np N PROG2). Returns mpirun's exit status (124: the timeout).
# Under MPICH (PT_MPI=mpich): $MPIEXEC -n NP (Hydra: no --oversubscribe or --mca, every variable of
# the environment passed on by default, -x VAR=VALUE becomes -genv VAR VALUE, -x VAR is dropped).
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
    # the arguments in order, less the first "--"; under MPICH the options before it in Hydra's words
    _mr_i=$# _mr_sep=0
    while [ "$_mr_i" -gt 0 ]; do
        _mr_a=$1
        shift
        _mr_i=$((_mr_i - 1))
        if [ "$_mr_sep" = 0 ] && [ "$_mr_a" = -- ]; then _mr_sep=1
        elif [ "$_mr_sep" = 0 ] && [ "$_mr_a" = -x ] && mpich && [ "$_mr_i" -gt 0 ]; then
            _mr_a=$1
            shift
            _mr_i=$((_mr_i - 1))
            case $_mr_a in *=*) set -- "$@" -genv "${_mr_a%%=*}" "${_mr_a#*=}" ;; esac
        else set -- "$@" "$_mr_a"; fi
    done
    if mpich; then
        set -- "$MPIEXEC" -n "$_mr_np" "$@"
    else
        # shellcheck disable=SC2086
        set -- "$MPIEXEC" --oversubscribe --mca mpi_yield_when_idle 1 $_mr_x -np "$_mr_np" "$@"
    fi
    [ "$_mr_t" = 0 ] || set -- timeout "$_mr_t" "$@"
    "$@"
}
case $BUILD in /*) B=$BUILD ;; *) B=./$BUILD ;; esac

# impl_compiles TAG CMD...: the implementation (a TU defining PTRAIN_IMPLEMENTATION) compiles with each
# compiler command (-Wall -Wextra -Werror -O1; the commands run together, one core each) and defines
# only pt_*/PT_* symbols: one PASS/FAIL per command. A command written soak:CMD runs only under
# SOAK=1 (another script compiles the same in make test).
impl_compiles() {
    _ic_tag=$1
    shift
    printf '#define PTRAIN_IMPLEMENTATION\n#include "ptrain.h"\n' >"$BUILD/${_ic_tag}_tu.c"
    _ic_pids=""
    for _ic_cc in "$@"; do
        case $_ic_cc in soak:*) soak || continue; _ic_cc=${_ic_cc#soak:} ;; esac
        _ic_o=$BUILD/${_ic_tag}_tu.$(echo "$_ic_cc" | tr -c 'a-zA-Z0-9+\n' '_').o
        $_ic_cc -Wall -Wextra -Werror -O1 -I"$INC" -c "$BUILD/${_ic_tag}_tu.c" -o "$_ic_o" >"$_ic_o.log" 2>&1 &
        _ic_pids="$_ic_pids$! "
    done
    for _ic_cc in "$@"; do
        case $_ic_cc in soak:*) soak || continue; _ic_cc=${_ic_cc#soak:} ;; esac
        _ic_o=$BUILD/${_ic_tag}_tu.$(echo "$_ic_cc" | tr -c 'a-zA-Z0-9+\n' '_').o
        _ic_p=${_ic_pids%% *} _ic_pids=${_ic_pids#* }
        if wait "$_ic_p"; then
            _ic_bad=$(nm -g --defined-only "$_ic_o" | awk 'NF >= 3 {print $3}' | grep -v -E '^(pt_|PT_)' | tr '\n' ' ')
            if [ -z "$_ic_bad" ]; then pass "compile $_ic_cc -Wall -Wextra -Werror; only pt_*/PT_* symbols"; else
                fail "compile $_ic_cc" "symbols outside pt_/PT_: $_ic_bad"; fi
        else
            fail "compile $_ic_cc -Wall -Wextra -Werror" "see $_ic_o.log"
            head -n 20 "$_ic_o.log" | sed 's/^/    /'
        fi
    done
}

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
