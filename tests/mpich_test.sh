#!/bin/sh
# tests/mpich_test.sh [BUILD_DIR] - the MPI parts under MPICH as well as Open MPI (docs/mpi.md), with
# Debian's MPICH named explicitly (mpicc.mpich, mpicxx.mpich, mpiexec.mpich), so the alternatives
# mpicc / mpirun stay Open MPI's:
#  - installing MPICH (make deps) left mpicc, mpicxx and mpirun on Open MPI;
#  - the implementation compiles warning-free with mpicc.mpich (-std=c99 -O2 -fopenmp -Werror: the
#    object test_equiv links; test_ckpt's own compile; under SOAK=1 also C11 -pedantic and
#    mpicxx.mpich as C++11, only pt_*/PT_* symbols);
#  - the non-blocking DP reductions complete and equal the single process (the dp layouts), and
#    start during backward (test_equiv's --recompute layout at dp2; SOAK=1: test_dp at 2 ranks) -
#    MPICH progresses them only inside MPI calls, the MPI_Test that >>dp polls during backward;
#  - tests/equiv_test.sh and tests/ckpt_test.sh under PT_MPI=mpich: a reduced set of 2-rank
#    equivalence layouts and checkpoint save / exact resume / reshard runs (SOAK=1, make soak or
#    make test MPI=mpich: every layout and run of at most as many ranks as CPUs; MPICH 4.0.2
#    busy-polls, see tests/mpi_lib.sh mpi_fits).
# Prints PASS/FAIL lines and "N passed, N failed"; about a minute and a half on 2 busy cores, most of
# it the two compiles of the implementation (test_ckpt reaches internals and compiles its own).
set -u
cd "$(dirname "$0")/.." || exit 1
# MPICC / MPICXX / MPIEXEC from the environment only when it already chose MPICH (PT_MPI=mpich)
[ "${PT_MPI:-}" = mpich ] || unset MPICC MPICXX MPIEXEC
PT_MPI=mpich
. tests/mpi_lib.sh
# the MPICH objects apart from Open MPI's (tests/run.sh shares $BUILD/impl between scripts)
PT_IMPL_DIR=$BUILD/impl
export PT_IMPL_DIR
S0=$(date +%s)

# ---- MPICH is there; the alternatives still give Open MPI ----
if ! have "$MPICC" || ! have "$MPIEXEC"; then
    fail "MPICH" "$MPICC / $MPIEXEC not found: install $MPI_PKGS (make deps)"
    echo "$NP passed, $NF failed"
    exit 1
fi
pass "MPICH: $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*/MPICH /p;s/^MPICH Device:[[:space:]]*/device /p' | tr '\n' ' ')"
alt_bad=""
for t in mpicc:mpicc.openmpi mpicxx:mpicxx.openmpi mpirun:mpirun.openmpi mpiexec:mpiexec.openmpi; do
    got=$(readlink -f "$(command -v "${t%%:*}")" 2>/dev/null) want=$(readlink -f "$(command -v "${t#*:}")" 2>/dev/null)
    [ -n "$want" ] && [ "$got" = "$want" ] || alt_bad="$alt_bad ${t%%:*} is ${got:-missing}, ${t#*:} is ${want:-missing};"
done
inc=$(readlink -f /usr/include/x86_64-linux-gnu/mpi 2>/dev/null)
[ -z "$inc" ] || case $inc in *openmpi*) ;; *) alt_bad="$alt_bad /usr/include/x86_64-linux-gnu/mpi is $inc;" ;; esac
ver=$(mpirun --version 2>&1 | head -n 1)
case $ver in *"Open MPI"*) ;; *) alt_bad="$alt_bad mpirun --version: $ver;" ;; esac
if [ -z "$alt_bad" ]; then
    pass "mpicc, mpicxx, mpirun, mpiexec and the mpi headers still resolve to Open MPI ($ver)"
else
    fail "mpicc, mpicxx, mpirun, mpiexec and the mpi headers resolve to Open MPI" "$alt_bad (update-alternatives --display mpi; make deps sets them back: update-alternatives --set mpi /usr/bin/mpicc.openmpi, the same for mpirun and mpi-x86_64-linux-gnu)"
fi

# ---- the implementation object (test_equiv's, built while ckpt_test compiles test_ckpt; the
# compile check with -Werror), the C11 and C++ compiles (SOAK=1), test_dp (SOAK=1: test_equiv's
# --recompute layout checks the overlap too) ----
build_bg "$BUILD/impl_mpi.build.log" impl_obj mpi
p_impl=$!
p_dp=""
soak && build_bg "$BUILD/test_dp.build.log" "$MPICC" $W -DPTRAIN_MPI -fopenmp tests/test_dp.c -o "$BUILD/test_dp_mpi" -lm && p_dp=$!
impl_compiles mpich "soak:$MPICC -std=c11 -pedantic -DPTRAIN_MPI" "soak:$MPICXX -x c++ -std=c++11 -DPTRAIN_MPI"

# ---- the checkpoint and equivalence suites under MPICH ----
# suite NAME: tests/NAME_test.sh under PT_MPI=mpich, its PASS/FAIL/NOTE lines indented
suite() {
    t0=$(date +%s)
    prog "tests/$1_test.sh under MPICH" "$BUILD/$1_mpich.log" sh "tests/$1_test.sh" "$BUILD"
    grep -E '^(PASS|FAIL|NOTE) ' "$BUILD/$1_mpich.log" | sed 's/^/    /'
    echo "    ($(($(date +%s) - t0)) s)"
}
suite ckpt
if wait $p_impl; then
    pass "compile $MPICC -std=c99 -O2 -fopenmp -DPTRAIN_MPI -Wall -Wextra -Werror (the object test_equiv links)"
else
    fail "compile $MPICC -std=c99 -O2 -fopenmp -DPTRAIN_MPI -Wall -Wextra -Werror" "see $PT_IMPL_DIR/mpi.log"
    head -n 20 "$PT_IMPL_DIR/mpi.log" | sed 's/^/    /'
fi
suite equiv
# the wrong launcher: the MPICH build under Open MPI's mpirun is 2 worlds of 1 rank, which
# pt_dist_init refuses naming both (the launcher's OMPI_COMM_WORLD_SIZE, the library's version)
if [ -x "$BUILD/test_equiv" ] && have mpirun; then
    timeout 60 mpirun --oversubscribe -np 2 "$B/test_equiv" --dp 2 >"$BUILD/launcher_mismatch.log" 2>&1
    if grep -q 'MPI sees a world of 1 rank, but the launcher started 2 (OMPI_COMM_WORLD_SIZE=2).*this one: MPICH' "$BUILD/launcher_mismatch.log"; then
        pass "the MPICH build under Open MPI's mpirun: pt_dist_init names the mismatch on every rank"
    else fail "the MPICH build under Open MPI's mpirun" "no mismatch message: $(head -n 3 "$BUILD/launcher_mismatch.log" | tr '\n' ' ')"; fi
fi
if [ -n "$p_dp" ]; then
    if wait $p_dp; then
        prog "$MPIEXEC -n 2 test_dp (buckets overlapped with backward, equal to one process)" "$BUILD/dp_np2.log" mpi_run 2 -- "$B/test_dp_mpi"
    else
        fail "build test_dp ($MPICC)" "see $BUILD/test_dp.build.log"
        head -n 20 "$BUILD/test_dp.build.log" | sed 's/^/    /'
    fi
fi
echo "mpich_test: $(($(date +%s) - S0)) s"
echo "$NP passed, $NF failed"
[ "$NF" -eq 0 ]
