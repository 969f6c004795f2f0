#!/usr/bin/env bash
# Makes .venv/ (a Python virtual environment) with what the Python package and its tests need
# from PyPI (python/requirements-test.txt: torch, transformers, pytest, numpy, nanobind,
# scikit-build-core, pinned) and installs
# flashgen into it with `pip install .` (the C++ build through scikit-build-core, cached in
# build-python/). Safe to run again: installed packages are kept, flashgen is rebuilt
# incrementally. Needs what scripts/setup.sh installs (run first).
set -euo pipefail
cd "$(dirname "$0")/.."
# A Python with venv and its headers (Debian's python3 needs python3-venv and python3-dev).
if ! python3 -c "import ensurepip, sysconfig, os, sys; \
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
     2> /dev/null; then
  echo "python_env: installing python3-venv python3-dev"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv python3-dev
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# No download cache: torch and its CUDA wheels take several GB once installed, and a cached
# copy of each would double that on a machine whose disk may be small.
pip() { .venv/bin/python -m pip --disable-pip-version-check --no-cache-dir -q "$@"; }
# Every pin of python/requirements-test.txt installed (a local version tag like +cu132 counts).
pinned_ok() {
  .venv/bin/python - python/requirements-test.txt <<'PY' 2> /dev/null
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, want = line.split("==")
        if version(name).split("+")[0] != want:
            sys.exit(1)
PY
}
if ! pinned_ok; then
  echo "python_env: installing python/requirements-test.txt from PyPI into .venv (several GB, about a minute)"
  pip install -r python/requirements-test.txt
fi
echo "python_env: building and installing flashgen into .venv (the log is in build-python/pip.log)"
mkdir -p build-python
pip install --no-build-isolation --no-deps . > build-python/pip.log 2>&1 ||
  { cat build-python/pip.log; exit 1; }
