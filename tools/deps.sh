#!/bin/sh
# Installs the Debian packages ptrain.h's build, tests, benchmarks and tutorials use; idempotent.
# Usage: sh tools/deps.sh   (as root, or with sudo available)
# clang needs libomp-dev (LLVM's OpenMP: omp.h, libomp.so) for -fopenmp; libclang-rt-14-dev for the fuzzers.
set -u
PKGS="build-essential make gzip openmpi-bin libopenmpi-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev libopenblas-dev dataset-fashion-mnist fortunes wamerican clang libomp-dev libclang-rt-14-dev valgrind"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
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
