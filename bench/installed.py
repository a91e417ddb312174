"""Run the benchmarks' subprocesses as on an installed copy: with exactq's bytecode compiled.

``pip install`` compiles every module to ``__pycache__`` when it installs the package; a
checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (as this sandbox sets it) compiles every
module it imports again in every process. That is not what a user waits for, and it is not
small: on the 23-state zeroconf MDP the first check in a process took 42 ms, 26 ms of them
compiling the modules imported on the way (``exactq.solvers.csl``, ``stationary``, ...),
against 12.5 ms with the bytecode in place (measured 2026-12-02).
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exactq", "solvers", "models")


def precompile() -> dict:
    """Compile the package's modules into ``__pycache__`` (what ``pip install`` does); returns what was done,
    for the results' JSON."""
    ok = all(compileall.compile_dir(str(ROOT / p), quiet=1, force=False) for p in PACKAGES if (ROOT / p).is_dir())
    return {"bytecode": "precompiled into __pycache__ before the runs, as pip install does", "compiled_ok": bool(ok)}


def worker_env() -> dict:
    """The environment of a worker subprocess: the bytecode is read (and written), not recompiled."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def stale_index() -> str | None:
    """Why the measurement would not be an installed copy's: the catalogue index does not match the sources
    (every process then imports each model and solver module on its first look-up, inside the timed checks:
    a Herman ring's expected-reward check 0.13 -> 0.23 s, measured 2026-12-04); None when it is fresh."""
    from exactq.catalogue import index_status

    status = index_status()
    if status == "fresh":
        return None
    return f"the catalogue index is {status}; run `python -m exactq.catalogue_index` first"
