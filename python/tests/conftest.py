"""Shared fixtures of the Python tests: the repository root, a clean Dynamo and backend report
per test, and a spy on the custom op flashgen::run. Used by test_backend.py and
test_models.py."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def fresh_compile():
    """Dynamo's caches and the flashgen backend's report, reset; fixed seeds."""
    torch = pytest.importorskip("torch")
    from flashgen.torch._backend import reset_report

    torch._dynamo.reset()
    reset_report()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


@pytest.fixture
def op_spy(monkeypatch):
    """The kernel keys torch.ops.flashgen.run is called with (its real implementation and its
    fake one both look the kernel up; clear() after compiling to see only runs)."""
    from flashgen.torch import _ops

    keys = []
    real = _ops.kernel_by_key

    def spy(key):
        keys.append(key)
        return real(key)

    monkeypatch.setattr(_ops, "kernel_by_key", spy)
    return keys
