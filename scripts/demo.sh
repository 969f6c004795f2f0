#!/usr/bin/env bash
# The demo: builds `flashgen`, shows what the compiler makes of the causal attention example
# (one fused kernel), then compiles and runs it on the CPU backend on random inputs and prints
# each output's summary and its error against the f64 reference evaluator; then verifies the
# sliding-window example on every backend of the machine and profiles it on the CPU; then makes
# the Python environment (scripts/python_env.sh: torch from PyPI, flashgen by `pip install .`)
# and runs python/examples/quickstart.py: a program called with torch tensors, FlexAttention's
# call with a document mask, and torch.compile(backend="flashgen") on a small attention module.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "demo: building flashgen (the log is in build/demo-build.log)"
ninja -C build -j2 flashgen > build/demo-build.log 2>&1 || { cat build/demo-build.log; exit 1; }

run() {
  echo
  echo "\$ flashgen $*"
  build/flashgen "$@"
}
echo
echo "== examples/causal.attn"
cat examples/causal.attn
run explain examples/causal.attn --sizes b=1,h=4,m=n=256,d=e=64
run run examples/causal.attn --random b=1,h=4,m=n=256,d=e=64 --backend cpu --check
run verify examples/sliding_window.attn --random b=1,h=4,m=n=700,d=e=64
run profile examples/sliding_window.attn --sizes b=1,h=4,m=n=700,d=e=64 --backend cpu --iters 5

echo
echo "== from Python: python/examples/quickstart.py"
./scripts/python_env.sh
echo "\$ .venv/bin/python python/examples/quickstart.py"
.venv/bin/python python/examples/quickstart.py
