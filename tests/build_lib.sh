# tests/build_lib.sh - how the test programs build, sourced by tests/run.sh and tests/mpi_lib.sh (so by
# every test script) after `cd` to the repository root, with INC (the directory of ptrain.h) and CC set.
#
# Compiling ptrain.h's implementation takes ~16 s of CPU; a test program's own code takes well under a
# second. So each configuration of the implementation (compiler, -O level, sanitizer, -DPTRAIN_MPI,
# -DPTRAIN_OPENCL, -fopenmp, feature macros, PTRAIN_TEST_HOOKS, PTRAIN_HARNESS) is compiled once into
# $PT_IMPL_DIR/CONFIG.o, and a program is its own translation unit compiled with
# -DPTRAIN_IMPLEMENTATION_DONE -DPTRAIN_HARNESS_DONE (ptrain.h gives it the declarations only, although
# it defines PTRAIN_IMPLEMENTATION) and linked to that object. A program that reaches pt__* internals
# or changes the implementation before the include (PT_MALLOC, PTRAIN_STATIC, PT_JSON_MAX_TREE, ...)
# keeps its own full compile.
#
# build_prog OUT SRC CONFIG [ARG...]: builds the program OUT from SRC linked to CONFIG's object
# (built first when missing or stale); ARGs go on the program's command line after the sources
# (extra flags, libraries). Its exit status is the build's. CONFIG is BASE[+MOD...]:
#   BASE  w      $CC -std=c99 -O2 -Wall -Wextra -Werror   (the scripts' $W)
#         mpi    $MPICC (default mpicc; mpicc.mpich under PT_MPI=mpich), $W -DPTRAIN_MPI -fopenmp
#         mpi0   $MPICC, $W -DPTRAIN_MPI (no OpenMP)
#         opt    $CC -std=c99 -O2 -march=native -fopenmp -Wall -Wextra   (tests/run.sh's programs)
#         asan   $CC -std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra
#         tsan   ${TSAN_CC:-$CC} -std=c99 -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Wall -Wextra
#         tool   $CC -O2 -Wall -Wextra -Werror   (the tools, warnings as errors)
#   MOD   omp (-fopenmp), cl (-DPTRAIN_OPENCL: no -l flags, the libraries are loaded at run time): both translation units;
#         posix (_POSIX_C_SOURCE 200809L), posix01 (200112L), gnu (_GNU_SOURCE), hooks
#         (PTRAIN_TEST_HOOKS), harness (PTRAIN_HARNESS): the implementation's only, as the program
#         defines them itself before including ptrain.h - they must match what it defines.
# impl_obj CONFIG: builds CONFIG's object unless it is up to date (same command, newer than
# $INC/ptrain.h); prints its path. One build at a time per object (a lock directory), so scripts and
# background builds may ask for the same object together. Its log: $PT_IMPL_DIR/CONFIG.log.
# PT_IMPL_DIR defaults to $BUILD/impl (tests/run.sh exports it, so all its scripts share the objects).
# PT_FULL_COMPILE=1: every program compiles the whole implementation again (the old way; to compare).
#
# PT_OWN: what a program that keeps its own compile of the implementation adds to its command line:
# -DPTRAIN_STATIC. Every API function is then static, so the compiler generates code only for the
# functions the program reaches (a test of a few functions compiles in a tenth of the time of the
# whole implementation; test_core, which reaches most of it, in two thirds). The code compiled is
# the same; only its linkage differs (docs: PTRAIN_STATIC). Not for a check of the implementation as
# users build it (compile_test, impl_compiles, the tools' Build: lines, the tutorials that
# examples_test builds verbatim). The scripts' -Werror builds ($W) use it too: with every function
# static, gcc's optimizer sees through more calls and may warn where the extern build does not
# (format-truncation in pt_ckpt_step_dir and maybe-uninitialized in the sampler did, since fixed),
# so those builds hold ptrain.h to -Werror under -DPTRAIN_STATIC as well. Empty under PT_FULL_COMPILE=1.

PT_IMPL_DIR=${PT_IMPL_DIR:-${BUILD:-build/tests}/impl}
PT_OWN=-DPTRAIN_STATIC
[ "${PT_FULL_COMPILE:-0}" = 1 ] && PT_OWN=""

# _bl_config CONFIG: sets _bl_cc, _bl_flags (both TUs), _bl_defs (the implementation TU's #defines),
# _bl_libs; status 1 for an unknown CONFIG
_bl_config() {
    _bl_defs=""
    _bl_libs=""
    case ${1%%+*} in
    w) _bl_cc=$CC _bl_flags="-std=c99 -O2 -Wall -Wextra -Werror -I$INC" ;;
    mpi) _bl_cc=${MPICC:-mpicc} _bl_flags="-std=c99 -O2 -Wall -Wextra -Werror -I$INC -DPTRAIN_MPI -fopenmp" ;;
    mpi0) _bl_cc=${MPICC:-mpicc} _bl_flags="-std=c99 -O2 -Wall -Wextra -Werror -I$INC -DPTRAIN_MPI" ;;
    opt) _bl_cc=$CC _bl_flags="-std=c99 -O2 -march=native -fopenmp -Wall -Wextra -I$INC" ;;
    asan) _bl_cc=$CC _bl_flags="-std=c99 -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra -I$INC" ;;
    tsan) _bl_cc=${TSAN_CC:-$CC} _bl_flags="-std=c99 -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Wall -Wextra -I$INC" ;;
    tool) _bl_cc=$CC _bl_flags="-O2 -Wall -Wextra -Werror -I$INC" ;;
    *) return 1 ;;
    esac
    _bl_rest=$1
    while :; do
        case $_bl_rest in *+*) _bl_rest=${_bl_rest#*+} ;; *) break ;; esac
        case ${_bl_rest%%+*} in
        omp) _bl_flags="$_bl_flags -fopenmp" ;;
        cl) _bl_flags="$_bl_flags -DPTRAIN_OPENCL" ;;
        posix) _bl_defs="$_bl_defs#define _POSIX_C_SOURCE 200809L\n" ;;
        posix01) _bl_defs="$_bl_defs#define _POSIX_C_SOURCE 200112L\n" ;;
        gnu) _bl_defs="$_bl_defs#define _GNU_SOURCE\n" ;;
        hooks) _bl_defs="$_bl_defs#define PTRAIN_TEST_HOOKS\n" ;;
        harness) _bl_defs="$_bl_defs#define PTRAIN_HARNESS\n" ;;
        *) return 1 ;;
        esac
    done
    case $_bl_flags in *-fsanitize=thread*) _bl_libs="$_bl_libs -lpthread" ;; esac
    return 0
}

impl_obj() {
    _bl_config "$1" || { echo "build_lib.sh: unknown configuration '$1'" >&2; return 1; }
    mkdir -p "$PT_IMPL_DIR" || return 1
    _io_base=$PT_IMPL_DIR/$1
    _io_cmd="$_bl_cc $_bl_flags -c $_io_base.c -o $_io_base.o"
    # one builder at a time: the lock directory holds the compiler's pid; a lock whose compiler is gone
    # (a killed build) is taken over, and so is one without a pid for 15 minutes
    while ! mkdir "$_io_base.lock" 2>/dev/null; do
        _io_pid=$(cat "$_io_base.lock/pid" 2>/dev/null)
        if { [ -n "$_io_pid" ] && ! kill -0 "$_io_pid" 2>/dev/null; } ||
            { [ -z "$_io_pid" ] && [ -n "$(find "$_io_base.lock" -maxdepth 0 -mmin +15 2>/dev/null)" ]; }; then
            rm -rf "$_io_base.lock"
        else sleep 1; fi
    done
    _io_rc=0
    if [ ! -f "$_io_base.o" ] || [ "$INC/ptrain.h" -nt "$_io_base.o" ] || [ "$(cat "$_io_base.cmd" 2>/dev/null)" != "$_io_cmd" ]; then
        rm -f "$_io_base.o" "$_io_base.cmd"
        printf "$_bl_defs#define PTRAIN_IMPLEMENTATION\n#include \"ptrain.h\"\n" >"$_io_base.c"
        # shellcheck disable=SC2086
        $_io_cmd >"$_io_base.log" 2>&1 &
        echo $! >"$_io_base.lock/pid"
        if wait $!; then echo "$_io_cmd" >"$_io_base.cmd"; else _io_rc=1; rm -f "$_io_base.o"; fi
    fi
    rm -rf "$_io_base.lock"
    [ $_io_rc = 0 ] && echo "$_io_base.o"
    return $_io_rc
}

build_prog() {
    _bp_out=$1 _bp_src=$2 _bp_conf=$3
    shift 3
    _bl_config "$_bp_conf" || { echo "build_lib.sh: unknown configuration '$_bp_conf'" >&2; return 1; }
    if [ "${PT_FULL_COMPILE:-0}" = 1 ]; then
        # shellcheck disable=SC2086
        $_bl_cc $_bl_flags "$_bp_src" -o "$_bp_out" "$@" $_bl_libs -lm
        return
    fi
    if ! _bp_obj=$(impl_obj "$_bp_conf"); then
        echo "build_prog: the implementation object $PT_IMPL_DIR/$_bp_conf.o does not build:"
        head -n 30 "$PT_IMPL_DIR/$_bp_conf.log"
        return 1
    fi
    _bl_config "$_bp_conf"
    # shellcheck disable=SC2086
    $_bl_cc $_bl_flags -DPTRAIN_IMPLEMENTATION_DONE -DPTRAIN_HARNESS_DONE "$_bp_src" "$_bp_obj" -o "$_bp_out" "$@" $_bl_libs -lm
}
