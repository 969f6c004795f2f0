"""python/examples/quickstart.py, the demo's Python part, runs and reports what it should."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs():
    r = subprocess.run([sys.executable, str(ROOT / "python/examples/quickstart.py")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line[:2] in ("1.", "2.", "3.")]
    assert len(lines) == 3, r.stdout
    assert "captured 1 attention, left 0 alone" in lines[2]
