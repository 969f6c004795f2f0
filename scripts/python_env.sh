#!/usr/bin/env bash
# Makes .venv/ (a Python virtual environment) with what the Python package and its tests need
# from PyPI (torch, transformers, pytest, numpy, nanobind, scikit-build-core) and installs
# flashgen into it with `pip install .` (the C++ build through scikit-build-core, cached in
# build-python/). Safe to run again: installed packages are kept, flashgen is rebuilt
# incrementally. Needs what scripts/setup.sh installs (run first).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }
wanted=(torch transformers pytest numpy nanobind scikit-build-core)
if ! .venv/bin/python -c "import torch, transformers, pytest, numpy, nanobind, scikit_build_core" \
     2> /dev/null; then
  echo "python_env: installing ${wanted[*]} from PyPI into .venv (several GB, about a minute)"
  pip install "${wanted[@]}"
fi
echo "python_env: building and installing flashgen into .venv (the log is in build-python/pip.log)"
mkdir -p build-python
pip install --no-build-isolation --no-deps . > build-python/pip.log 2>&1 ||
  { cat build-python/pip.log; exit 1; }
