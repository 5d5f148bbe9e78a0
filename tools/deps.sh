#!/bin/sh
# Installs the Debian packages ptrain.h's build, tests, benchmarks and tutorials use, then the tests'
# own Python environment (build/pyenv: the `gguf` and numpy packages from PyPI, which
# tests/gguf_test.sh reads GGUF files with, and the `openai` client, which tests/abuse_serve.sh
# talks to ptserve over HTTPS with; optional: without it those checks skip with a NOTE); idempotent.
# Usage: sh tools/deps.sh   (as root, or with sudo available). Env PTRAIN_PYENV: another place for
# the Python environment. Without PyPI the environment is left out with a message (exit status 0:
# the tests that need it skip with a NOTE).
# clang needs libomp-dev (LLVM's OpenMP: omp.h, libomp.so) for -fopenmp; libclang-rt-14-dev for the fuzzers;
# iproute2 (ip) and util-linux (unshare, nsenter) for the namespace hosts of tests/nshosts.sh (the supervisor's
# host trial); procps (pgrep) for the trials' check that no process is left.
# OpenCL: the library, the tutorials and the tools load libOpenCL.so.1 (ocl-icd-libopencl1) and libclblast.so.1
# (libclblast1) at run time and run on PoCL (pocl-opencl-icd); they need no -dev package. ocl-icd-opencl-dev,
# opencl-headers and libclblast-dev stay for bench/bench_cl.c (its baselines call OpenCL and CLBlast directly) and
# tests/compile_test.sh's check that ptrain.h compiles beside <CL/cl.h> and <clblast_c.h>.
# tools/ptserve needs libmicrohttpd-dev; its tests use curl, and its browser test chromium, chromium-driver and python3-selenium.
# mpich and libmpich-dev: the MPI suites once more under MPICH (mpicc.mpich, mpiexec.mpich; docs/mpi.md). Open MPI stays
# the one that mpicc / mpirun name: Debian's alternatives rank it first (priority 50 to MPICH's 40) and, should they
# point elsewhere after an install of this script's, they are set back to Open MPI.
# tests/arm64_test.sh cross-compiles for AArch64 and runs under qemu-user: qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross.
set -u
PKGS="build-essential make gzip openmpi-bin libopenmpi-dev mpich libmpich-dev ocl-icd-libopencl1 libclblast1 pocl-opencl-icd ocl-icd-opencl-dev opencl-headers libclblast-dev libopenblas-dev dataset-fashion-mnist fortunes wamerican clang libomp-dev libclang-rt-14-dev valgrind python3-venv iproute2 util-linux procps libmicrohttpd-dev curl chromium chromium-driver python3-selenium qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# the tests' Python environment: made once, kept while it imports gguf, numpy and openai
pyenv() {
  PYENV=${PTRAIN_PYENV:-$ROOT/build/pyenv}
  if [ -x "$PYENV/bin/python" ] && "$PYENV/bin/python" -c 'import gguf, numpy, openai' >/dev/null 2>&1; then return 0; fi
  if ! command -v python3 >/dev/null 2>&1; then
    echo "deps: no python3: tests/gguf_test.sh will skip its Python checks" >&2
    return 0
  fi
  mkdir -p "$(dirname "$PYENV")"
  if ! [ -x "$PYENV/bin/python" ] && ! python3 -m venv "$PYENV" >"$PYENV.log" 2>&1; then
    echo "deps: python3 -m venv $PYENV failed (Debian: python3-venv; see $PYENV.log): tests/gguf_test.sh will skip its Python checks" >&2
    return 0
  fi
  if "$PYENV/bin/python" -m pip install -q --disable-pip-version-check gguf numpy >>"$PYENV.log" 2>&1; then
    echo "deps: $PYENV: $("$PYENV/bin/python" -c 'import gguf, numpy; from importlib.metadata import version; print("gguf", version("gguf"), "numpy", numpy.__version__)')"
  else
    echo "deps: pip install gguf numpy into $PYENV failed (is PyPI reachable? see $PYENV.log): tests/gguf_test.sh will skip its Python checks" >&2
  fi
  if "$PYENV/bin/python" -m pip install -q --disable-pip-version-check openai >>"$PYENV.log" 2>&1; then
    echo "deps: $PYENV: openai $("$PYENV/bin/python" -c 'import openai; print(openai.__version__)')"
  else
    echo "deps: pip install openai into $PYENV failed (see $PYENV.log): tests/abuse_serve.sh will skip its openai checks" >&2
  fi
  return 0
}
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  pyenv
  exit 0
fi
echo "deps: missing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "deps: run as root (or with sudo): apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "deps: apt-get update failed (is a Debian mirror reachable?)" >&2; exit 1; }
$SUDO apt-get install -y -qq --no-install-recommends $missing || { echo "deps: apt-get install failed for:$missing" >&2; exit 1; }
echo "deps: installed:$missing"
# the MPI alternatives (mpicc, mpirun, the mpi headers and libraries) stay on Open MPI after MPICH came in
ma=$(gcc -print-multiarch 2>/dev/null)
for alt in mpi:/usr/bin/mpicc.openmpi mpirun:/usr/bin/mpirun.openmpi "mpi-$ma:/usr/lib/$ma/openmpi/include"; do
  name=${alt%%:*} want=${alt#*:}
  now=$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')
  [ -z "$now" ] || [ "$now" = "$want" ] || [ ! -e "$want" ] && continue
  $SUDO update-alternatives --set "$name" "$want" >/dev/null && echo "deps: the $name alternative was $now, set back to Open MPI's $want"
done
pyenv
