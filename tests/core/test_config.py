"""The project's pytest configuration collects the docstring examples (a plain ``python -m pytest`` runs them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collect(*args):
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_a_plain_run_collects_the_docstring_examples_of_the_core_drivers():
    items = _collect("exactq/truncation.py", "exactq/methods.py", "exactq/catalogue.py")  # no --doctest-modules
    for name in ("exactq/truncation.py::exactq.truncation.grow", "exactq/methods.py::exactq.methods.run",
                 "exactq/catalogue.py::exactq.catalogue"):
        assert name in items, items


def test_the_ci_command_collects_each_example_once():
    items = _collect("--doctest-modules", "exactq/protocol.py", "models/jsq_threshold.py", "tests/core/test_config.py")
    assert len(items) == len(set(items)) and any(i.startswith("models/jsq_threshold.py::") for i in items)
